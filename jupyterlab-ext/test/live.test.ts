import { describe, expect, it } from 'vitest';

import {
  formatBytes,
  formatCount,
  isValidName,
  liveItems,
  parseExpressionReply,
  parsePythonString,
  probeExpression,
  probeRequest,
  toProbeResult,
  torchImported
} from '../src/live';
import { CHINESE, ENGLISH } from '../src/panel';

/** What `repr()` of the helper's JSON answer looks like in `text/plain`. */
const pyRepr = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

// Facts as bridge/_kernel_probe.py reads them (tests/bridge/test_probe.py checks the kernel side).
const X = {
  kind: 'tensor', shape: [4, 6], dtype: 'torch.float32', device: 'cpu', layout: 'torch.strided',
  stride: [6, 1], storage_offset: 0, is_contiguous: true, channels_last: null, is_view: false,
  nbytes: 96, storage_nbytes: 96, requires_grad: true, is_leaf: true, grad_fn: null
};
const Y = {
  ...X, shape: [6, 4], stride: [1, 6], is_contiguous: false, is_view: true, requires_grad: true,
  is_leaf: false, grad_fn: 'TBackward0'
};
const NET = {
  kind: 'module', type: 'torch.nn.modules.linear.Linear', training: false, num_parameters: 14,
  trainable_parameters: 14, num_buffers: 0, devices: ['cuda:0'], dtypes: ['torch.float32']
};

describe('the probe request', () => {
  it('asks for a namespace scan and names only dotted identifiers', () => {
    const request = JSON.parse(probeRequest(['x', 'model.0.weight', 'a; import os', 'class', 'f()']));
    expect(request).toEqual({
      v: 1, names: ['x', 'model.0.weight'], views: [], kernel: true, scan: true, budget: 1
    });
    expect(isValidName('_x.y1')).toBe(true);
    expect(isValidName('0x')).toBe(false);
    expect(isValidName('x..y')).toBe(false);
  });

  it('passes the request as a Python string literal, never as code', () => {
    const request = '{"names":["a\\"b"],"s":"\'); import os; (\'"}';
    const expr = probeExpression('_torchdoctor_probe_0123456789ab', request);
    expect(expr).toBe(
      '__import__("sys").modules["_torchdoctor_probe_0123456789ab"].probe(' + JSON.stringify(request) + ')'
    );
    // The literal reads back (as Python reads a double-quoted literal) to the request itself.
    const literal = expr.slice(expr.indexOf('.probe(') + 7, -1);
    expect(parsePythonString(literal)).toBe(request);
    expect(() => probeExpression('x"]; import os; #', request)).toThrow();
  });
});

describe('reading the reply', () => {
  it('parses repr() of a string, escapes included, and nothing else', () => {
    expect(parsePythonString(String.raw`'a\'b\\c\n\x41\u00e9\U0001f525'`)).toBe("a'b\\c\nAé🔥");
    expect(parsePythonString(`"it's"`)).toBe("it's");
    for (const bad of ["__import__('os').getcwd()", "'a' + 'b'", "b'x'", "'x", "'\\q'", '42']) {
      expect(() => parsePythonString(bad), bad).toThrow();
    }
  });

  it('decodes a user expression and the install answer', () => {
    const reply = { v: 1, facts: { x: X }, scanned: ['x'], kernel: { torch: '2.13.0' } };
    const value = parseExpressionReply({ status: 'ok', data: { 'text/plain': pyRepr(JSON.stringify(reply)) } });
    expect(value).toEqual(reply);
    expect(parseExpressionReply({ status: 'ok', data: { 'text/plain': 'True' } })).toBe(true);
    expect(() => parseExpressionReply({ status: 'error', ename: 'KeyError', evalue: "'m'" })).toThrow(/KeyError/);
    const result = toProbeResult(reply, 7);
    expect(result).toEqual({ facts: { x: X }, scanned: ['x'], kernel: { torch: '2.13.0' }, executionCount: 7 });
    expect(torchImported(result)).toBe(true);
    expect(torchImported(toProbeResult({ facts: {}, scanned: [], kernel: { torch: null } }, 1))).toBe(false);
  });
});

describe('the rows', () => {
  const result = toProbeResult(
    { facts: { x: X, y: Y, net: NET, n: { kind: 'other', type: 'int' } }, scanned: ['x', 'y', 'net'], kernel: {} },
    3
  );

  it('shows shape, dtype, device, strides, contiguity, size and autograd of each tensor', () => {
    const [x, y, net, ...rest] = liveItems(result, ENGLISH);
    expect(rest).toEqual([]);
    const fields = (item: typeof x) => Object.fromEntries(item!.fields.map(f => [f.key, f.text]));
    expect(x!.name).toBe('x');
    expect(fields(x)).toEqual({
      shape: '(4, 6)', dtype: 'float32', device: 'cpu', strides: 'strides (6, 1)',
      contiguous: 'contiguous', size: '96 B', grad: 'requires_grad'
    });
    expect(fields(y)).toMatchObject({
      shape: '(6, 4)', strides: 'strides (1, 6)', contiguous: 'not contiguous',
      grad: 'requires_grad, grad_fn=TBackward0'
    });
    expect(y!.fields.find(f => f.key === 'contiguous')!.warn).toBe(true);
    expect(y!.attrs).toEqual({ shape: '6,4', device: 'cpu', strides: '1,6', contiguous: 'false', requiresGrad: 'true' });
    expect(net!.kind).toBe('module');
    expect(fields(net)).toEqual({ type: 'Linear', device: 'cuda:0', mode: 'eval mode', params: '14 parameters' });
    expect(net!.attrs).toEqual({ device: 'cuda:0', mode: 'eval' });
  });

  it('speaks Chinese', () => {
    const [, y, net] = liveItems(result, CHINESE);
    expect(y!.fields.map(f => f.text)).toContain('不连续');
    expect(y!.fields.map(f => f.text)).toContain('步长 (1, 6)');
    expect(net!.fields.map(f => f.text)).toContain('评估模式');
  });

  it('marks channels_last, storage larger than the tensor, unreadable subclasses', () => {
    const facts = {
      c: { ...X, shape: [2, 3, 4, 5], stride: [60, 1, 15, 3], is_contiguous: false, channels_last: true },
      s: { ...X, nbytes: 200, storage_nbytes: 400, requires_grad: false },
      u: { kind: 'tensor', type: 'my.Sub', dtype: 'torch.float16', unreadable: '__torch_dispatch__' }
    };
    const [c, s, u] = liveItems(toProbeResult({ facts, scanned: ['c', 's', 'u'] }, 1), ENGLISH);
    expect(c!.fields.find(f => f.key === 'contiguous')!.text).toBe('not contiguous (channels_last)');
    expect(s!.fields.find(f => f.key === 'size')!.text).toBe('200 B (storage 400 B)');
    expect(s!.fields.find(f => f.key === 'grad')!.text).toBe('no grad');
    expect(u!.fields.map(f => f.key)).toEqual(['type', 'dtype', 'unreadable']);
  });

  it('formats sizes and counts', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(2 ** 30)).toBe('1 GiB');
    expect(formatBytes(300 * 2 ** 20)).toBe('300 MiB');
    expect(formatCount(1234567)).toBe('1,234,567');
  });
});
