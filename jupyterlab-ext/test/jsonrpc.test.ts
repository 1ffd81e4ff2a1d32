import { describe, expect, it } from 'vitest';

import { JsonRpcEndpoint, METHOD_NOT_FOUND, ResponseError } from '../src/jsonrpc';

function endpoint() {
  const sent: any[] = [];
  let closed = false;
  const rpc = new JsonRpcEndpoint({
    send: m => sent.push(JSON.parse(m)),
    close: () => {
      closed = true;
    }
  });
  return { rpc, sent, isClosed: () => closed };
}

describe('JsonRpcEndpoint', () => {
  it('matches responses to requests by id', async () => {
    const { rpc, sent } = endpoint();
    const a = rpc.request('a', { x: 1 });
    const b = rpc.request('b');
    expect(sent.map(m => [m.id, m.method])).toEqual([
      [1, 'a'],
      [2, 'b']
    ]);
    await rpc.receive(JSON.stringify({ jsonrpc: '2.0', id: 2, result: 'B' }));
    await rpc.receive(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { ok: true } }));
    await expect(a).resolves.toEqual({ ok: true });
    await expect(b).resolves.toBe('B');
  });

  it('rejects a request the server answered with an error', async () => {
    const { rpc } = endpoint();
    const a = rpc.request('a');
    await rpc.receive(
      JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32600, message: 'bad' } })
    );
    await expect(a).rejects.toBeInstanceOf(ResponseError);
  });

  it('routes notifications and answers server requests', async () => {
    const { rpc, sent } = endpoint();
    const seen: unknown[] = [];
    rpc.onNotification('n', p => seen.push(p));
    rpc.onRequest('workspace/configuration', () => [{ enable: true }]);
    await rpc.receive(JSON.stringify({ jsonrpc: '2.0', method: 'n', params: 7 }));
    await rpc.receive(JSON.stringify({ jsonrpc: '2.0', id: 'r1', method: 'workspace/configuration' }));
    await rpc.receive(JSON.stringify({ jsonrpc: '2.0', id: 'r2', method: 'unknown/method' }));
    expect(seen).toEqual([7]);
    expect(sent[0]).toEqual({ jsonrpc: '2.0', id: 'r1', result: [{ enable: true }] });
    expect(sent[1].error.code).toBe(METHOD_NOT_FOUND);
  });

  it('ignores garbage and fails pending requests when closed', async () => {
    const { rpc, isClosed } = endpoint();
    await rpc.receive('not json');
    const a = rpc.request('a');
    rpc.dispose();
    await expect(a).rejects.toThrow(/closed/);
    await expect(rpc.request('b')).rejects.toThrow(/closed/);
    expect(isClosed()).toBe(true);
  });
});
