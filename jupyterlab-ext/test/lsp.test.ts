import { describe, expect, it } from 'vitest';

import { applyEdits, Diagnostic, editsByUri, fixesOf, offsetAt, severityName, splitByOwner, TextEdit } from '../src/lsp';

const URI = 'vscode-notebook-cell:/w/nb.ipynb#b';

function diagnostic(data: unknown, source = 'torchdoctor'): Diagnostic {
  return {
    range: { start: { line: 0, character: 0 }, end: { line: 0, character: 4 } },
    message: 'm',
    code: 'TDR602',
    source,
    data
  };
}

describe('offsets and edits', () => {
  it('counts UTF-16 code units and clamps to the line', () => {
    const text = 'ab\n🔥x = 1\n';
    expect(offsetAt(text, { line: 1, character: 2 })).toBe(5);
    expect(offsetAt(text, { line: 0, character: 99 })).toBe(2);
    expect(offsetAt(text, { line: 9, character: 0 })).toBe(text.length);
  });

  it('applies several edits against the original text', () => {
    const text = 'state = torch.load("x.pt")\ny = 1';
    const out = applyEdits(text, [
      { range: { start: { line: 1, character: 4 }, end: { line: 1, character: 5 } }, newText: '2' },
      {
        range: { start: { line: 0, character: 25 }, end: { line: 0, character: 25 } },
        newText: ', map_location="cpu"'
      }
    ]);
    expect(out).toBe('state = torch.load("x.pt", map_location="cpu")\ny = 2');
  });
});

describe('fixesOf', () => {
  it('reads safe and unsafe fixes, with edits in other cells under their URI', () => {
    const fixes = fixesOf(
      diagnostic({
        fixes: [
          { title: 'Add', applicability: 'safe', edits: [{ range: [0, 1, 0, 2], newText: 'x' }] },
          {
            title: 'Import (unsafe)',
            applicability: 'unsafe',
            edits: [{ range: [0, 0, 0, 0], newText: 'import os\n', uri: 'other' }]
          },
          { title: 'Shown only', applicability: 'display', edits: [] }
        ]
      }),
      URI
    );
    expect(fixes.map(f => [f.title, f.applicability, [...f.edits.keys()]])).toEqual([
      ['Add', 'safe', [URI]],
      ['Import (unsafe)', 'unsafe', ['other']]
    ]);
    expect(fixes[0]!.edits.get(URI)![0]!.range.start).toEqual({ line: 0, character: 1 });
  });

  it('ignores other servers and malformed data', () => {
    expect(fixesOf(diagnostic({ fixes: [] }, 'pylsp'), URI)).toEqual([]);
    expect(fixesOf(diagnostic(null), URI)).toEqual([]);
    expect(
      fixesOf(diagnostic({ fixes: [{ title: 'x', applicability: 'safe', edits: [{ range: [1] }] }] }), URI)
    ).toEqual([]);
  });
});

describe('editsByUri and severities', () => {
  it('merges changes and documentChanges', () => {
    const e = { range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, newText: 'a' };
    const out = editsByUri({
      changes: { a: [e] },
      documentChanges: [{ textDocument: { uri: 'a', version: 1 }, edits: [e] }]
    });
    expect(out.get('a')).toHaveLength(2);
    expect(editsByUri(undefined).size).toBe(0);
  });

  it('names LSP severities', () => {
    expect([1, 2, 3, 4, undefined].map(severityName)).toEqual(['error', 'warning', 'info', 'hint', 'warning']);
  });
});

describe('splitByOwner', () => {
  const e = (newText: string): TextEdit[] => [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, newText }];
  const notebook = { name: 'nb', cells: ['nb#a', 'nb#b'] };
  const file = { name: 'file', cells: ['train.py'] };
  const owns = (o: typeof notebook, uri: string) => o.cells.includes(uri);

  it('splits a fix that touches several cells (and a file) by document', () => {
    const edits = new Map([['nb#a', e('1')], ['nb#b', e('2')], ['train.py', e('3')]]);
    const split = splitByOwner(edits, [notebook, file], owns)!;
    expect([...split.get(notebook)!.keys()]).toEqual(['nb#a', 'nb#b']);
    expect([...split.get(file)!.keys()]).toEqual(['train.py']);
  });

  it('refuses an edit with a URI that no open document owns (nothing is applied in part)', () => {
    expect(splitByOwner(new Map([['nb#a', e('1')], ['other.py', e('2')]]), [notebook, file], owns)).toBeNull();
  });
});
