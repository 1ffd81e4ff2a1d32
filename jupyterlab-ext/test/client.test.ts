import { describe, expect, it } from 'vitest';

import { DEFAULT_SETTINGS, initializeParams, LanguageClient, reconnectDelay } from '../src/client';
import { FIX_ALL_KIND, WorkspaceEdit } from '../src/lsp';

/** A client whose transport is a fake server answering with `answer`. */
function fake(answer: (method: string, params: any) => unknown) {
  const sent: any[] = [];
  const published: string[] = [];
  const applied: WorkspaceEdit[] = [];
  const client: LanguageClient = new LanguageClient(
    {
      send: raw => {
        const message = JSON.parse(raw) as { id?: number; method?: string; params?: unknown };
        sent.push(message);
        if (message.method !== undefined && message.id !== undefined) {
          const result = answer(message.method, message.params);
          queueMicrotask(() => {
            void client.endpoint.receive(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
          });
        }
      },
      close: () => undefined
    },
    {
      diagnostics: uri => published.push(uri),
      applyEdit: edit => {
        applied.push(edit);
        return true;
      },
      log: () => undefined,
      closed: () => undefined
    },
    { ...DEFAULT_SETTINGS, ignore: ['TDR602'] }
  );
  return { client, sent, published, applied };
}

const server = (raw: unknown) => JSON.stringify(raw);

describe('LanguageClient', () => {
  it('initializes, then says initialized', async () => {
    const { client, sent } = fake(() => ({ capabilities: {} }));
    await client.start('file:///w', 'en', '0.1.0');
    expect(sent.map(m => m.method)).toEqual(['initialize', 'initialized']);
    expect(sent[0].params.initializationOptions).toEqual({ enable: true, bridge: true, ignore: ['TDR602'] });
  });

  it('keeps published diagnostics per URI and answers the server', async () => {
    const { client, sent, published, applied } = fake(() => null);
    await client.endpoint.receive(
      server({ jsonrpc: '2.0', method: 'textDocument/publishDiagnostics', params: { uri: 'c1', diagnostics: [{ message: 'm' }] } })
    );
    expect(published).toEqual(['c1']);
    expect(client.diagnosticsOf('c1')).toHaveLength(1);
    expect(client.diagnosticsOf('c2')).toEqual([]);
    await client.endpoint.receive(
      server({ jsonrpc: '2.0', id: 5, method: 'workspace/configuration', params: { items: [{ section: 'torchdoctor' }, {}] } })
    );
    expect(sent.at(-1)).toEqual({
      jsonrpc: '2.0',
      id: 5,
      result: [
        { enable: true, bridge: true, ignore: ['TDR602'] },
        { enable: true, bridge: true, ignore: ['TDR602'] }
      ]
    });
    await client.endpoint.receive(
      server({ jsonrpc: '2.0', id: 6, method: 'workspace/applyEdit', params: { edit: { changes: { c1: [] } } } })
    );
    expect(applied).toEqual([{ changes: { c1: [] } }]);
    expect(sent.at(-1).result).toEqual({ applied: true });
    client.forget(['c1']);
    expect(client.diagnosticsOf('c1')).toEqual([]);
  });

  it('asks for the fix-all action and resolves its edit', async () => {
    const edit = { changes: { c1: [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, newText: 'x' }] } };
    const { client, sent } = fake(method =>
      method === 'textDocument/codeAction'
        ? [{ title: 'Fix all', kind: FIX_ALL_KIND, data: { action: 'fixAll', uri: 'c1' } }]
        : { title: 'Fix all', kind: FIX_ALL_KIND, edit }
    );
    await expect(client.fixAll('c1')).resolves.toEqual(edit);
    expect(sent.map(m => m.method)).toEqual(['textDocument/codeAction', 'codeAction/resolve']);
    expect(sent[0].params.context.only).toEqual([FIX_ALL_KIND]);
  });

  it('sends new settings as a configuration change', () => {
    const { client, sent } = fake(() => null);
    client.updateSettings({ ...DEFAULT_SETTINGS, unsafeFixes: true });
    expect(sent.at(-1)).toEqual({
      jsonrpc: '2.0',
      method: 'workspace/didChangeConfiguration',
      params: { settings: { torchdoctor: { enable: true, bridge: true, unsafeFixes: true } } }
    });
  });
});

describe('locale and reconnecting', () => {
  it('tells the server the JupyterLab language, so that it answers in Chinese for zh-CN', () => {
    const params = initializeParams('file:///w', 'zh-CN', DEFAULT_SETTINGS, '0.1.0');
    expect(params.locale).toBe('zh-CN');
    expect((params.capabilities as any).notebookDocument.synchronization).toBeDefined();
    expect((params.capabilities as any).textDocument.synchronization).toBeDefined();
  });

  it('waits longer after each failed attempt, up to 15 s', () => {
    expect([0, 1, 2, 3, 4, 5, 10].map(reconnectDelay)).toEqual([500, 1000, 2000, 4000, 8000, 15000, 15000]);
  });
});
