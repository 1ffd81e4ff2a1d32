import { describe, expect, it } from 'vitest';

import { TextDocumentSync } from '../src/textSync';

describe('TextDocumentSync', () => {
  it('opens with the whole text, sends only real changes with a new version, and closes', () => {
    const sent: [string, any][] = [];
    const sync = new TextDocumentSync('file:///w/train.py', (m, p) => sent.push([m, p]));
    sync.open('import torch\n');
    expect(sync.update('import torch\n')).toBe(false);
    expect(sync.update('import torch\nx = 1\n')).toBe(true);
    expect(sync.synced).toBe('import torch\nx = 1\n');
    sync.close();
    sync.close();
    expect(sent).toEqual([
      ['textDocument/didOpen', { textDocument: { uri: 'file:///w/train.py', languageId: 'python', version: 1, text: 'import torch\n' } }],
      ['textDocument/didChange', { textDocument: { uri: 'file:///w/train.py', version: 2 }, contentChanges: [{ text: 'import torch\nx = 1\n' }] }],
      ['textDocument/didClose', { textDocument: { uri: 'file:///w/train.py' } }]
    ]);
  });

  it('opens again (version 1) on a new connection', () => {
    const sent: string[] = [];
    const sync = new TextDocumentSync('u', m => sent.push(m));
    sync.open('a');
    sync.update('b');
    sync.open('b');
    expect(sent).toEqual(['textDocument/didOpen', 'textDocument/didChange', 'textDocument/didOpen']);
  });
});
