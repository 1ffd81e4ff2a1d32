import { describe, expect, it } from 'vitest';

import { cellUri, NotebookSync } from '../src/notebookSync';

function sync() {
  const sent: [string, any][] = [];
  const s = new NotebookSync('file:///w/nb.ipynb', '/w/nb.ipynb', (m, p) => sent.push([m, p]));
  return { s, sent };
}

const A = { id: 'a', text: 'import torch' };
const B = { id: 'b', text: 'x = 1' };
const C = { id: 'c', text: 'y = 2' };

describe('NotebookSync', () => {
  it('opens with every code cell', () => {
    const { s, sent } = sync();
    s.open([A, B]);
    const [method, params] = sent[0]!;
    expect(method).toBe('notebookDocument/didOpen');
    expect(params.notebookDocument.cells).toEqual([
      { kind: 2, document: cellUri('/w/nb.ipynb', 'a') },
      { kind: 2, document: cellUri('/w/nb.ipynb', 'b') }
    ]);
    expect(params.cellTextDocuments[1]).toMatchObject({ languageId: 'python', version: 1, text: 'x = 1' });
    expect(s.cellIdOf(cellUri('/w/nb.ipynb', 'b'))).toBe('b');
  });

  it('sends only the cell that changed, with its next version', () => {
    const { s, sent } = sync();
    s.open([A, B]);
    expect(s.update([A, B])).toBe(false);
    expect(s.update([A, { id: 'b', text: 'x = 2' }])).toBe(true);
    const [method, params] = sent[1]!;
    expect(method).toBe('notebookDocument/didChange');
    expect(params.notebookDocument.version).toBe(2);
    expect(params.change.cells.structure).toBeUndefined();
    expect(params.change.cells.textContent).toEqual([
      { document: { uri: s.uriOf('b'), version: 2 }, changes: [{ text: 'x = 2' }] }
    ]);
  });

  it('describes an inserted cell as a splice with didOpen', () => {
    const { s, sent } = sync();
    s.open([A, B]);
    s.update([A, C, B]);
    const structure = sent[1]![1].change.cells.structure;
    expect(structure.array).toEqual({ start: 1, deleteCount: 0, cells: [{ kind: 2, document: s.uriOf('c') }] });
    expect(structure.didOpen).toEqual([{ uri: s.uriOf('c'), languageId: 'python', version: 1, text: 'y = 2' }]);
    expect(structure.didClose).toEqual([]);
  });

  it('closes removed cells and keeps moved ones open', () => {
    const { s, sent } = sync();
    s.open([A, B, C]);
    s.update([C, A]);
    const structure = sent[1]![1].change.cells.structure;
    expect(structure.array.start).toBe(0);
    expect(structure.array.deleteCount).toBe(3);
    expect(structure.array.cells.map((c: any) => c.document)).toEqual([s.uriOf('c'), s.uriOf('a')]);
    expect(structure.didOpen).toEqual([]);
    expect(structure.didClose).toEqual([{ uri: s.uriOf('b') }]);
    expect(s.cellIdOf(s.uriOf('b'))).toBeUndefined();
  });

  it('closes the notebook with its cells', () => {
    const { s, sent } = sync();
    s.open([A]);
    s.close();
    expect(sent[1]).toEqual([
      'notebookDocument/didClose',
      { notebookDocument: { uri: 'file:///w/nb.ipynb' }, cellTextDocuments: [{ uri: s.uriOf('a') }] }
    ]);
    expect(s.isOpen).toBe(false);
  });

  it('spells cell URIs safely', () => {
    expect(cellUri('/w/my nb.ipynb', 'x/y')).toBe('vscode-notebook-cell:/w/my%20nb.ipynb#x%2Fy');
  });
});
