import { describe, expect, it } from 'vitest';

import { inlineCode, MARK_CLASS, plainText, renderMessage, splitInlineCode, toCmDiagnostics } from '../src/editor';
import { Diagnostic, Fix } from '../src/lsp';

const URI = 'cell';

describe('toCmDiagnostics', () => {
  it('marks the range with the rule code and turns each fix into a button', () => {
    const text = 'import torch\nstate = torch.load("x.pt")';
    const diagnostic: Diagnostic = {
      range: { start: { line: 1, character: 8 }, end: { line: 1, character: 26 } },
      message: '`torch.load` without `map_location`',
      severity: 2,
      code: 'TDR602',
      source: 'torchdoctor',
      data: {
        fixes: [
          { title: 'Add map_location', applicability: 'safe', edits: [{ range: [1, 25, 1, 25], newText: ', m' }] },
          { title: 'Other (unsafe)', applicability: 'unsafe', edits: [{ range: [1, 0, 1, 0], newText: '' }] }
        ]
      }
    };
    const applied: [Fix, Diagnostic][] = [];
    const [cm, ...rest] = toCmDiagnostics(text, URI, [diagnostic, { ...diagnostic, source: 'pylsp' }], (f, d) =>
      applied.push([f, d])
    );
    expect(rest).toEqual([]);
    expect(cm!.from).toBe(21);
    expect(cm!.to).toBe(39);
    expect(text.slice(cm!.from, cm!.to)).toBe('torch.load("x.pt")');
    expect(cm!.severity).toBe('warning');
    expect(cm!.markClass).toBe(`${MARK_CLASS} ${MARK_CLASS}-TDR602`);
    expect(cm!.actions!.map(a => [a.name, a.markClass])).toEqual([
      ['Add map_location', 'jp-torchdoctor-fix jp-torchdoctor-fix-safe'],
      ['Other (unsafe)', 'jp-torchdoctor-fix jp-torchdoctor-fix-unsafe']
    ]);
    cm!.actions![1]!.apply(null as never, 0, 0);
    expect(applied[0]![0].applicability).toBe('unsafe');
  });
});

describe('measured findings', () => {
  it('shows a measured-only finding in the cell, and what was measured in the tooltip', () => {
    const measured: Diagnostic = {
      range: { start: { line: 0, character: 0 }, end: { line: 0, character: 6 } },
      message: '10 forward calls with gradients on saved 320.0 KB of activations',
      severity: 3,
      code: 'TDR105',
      source: 'torchdoctor run',
      data: { measured: { summary: '320.0 KB of activations over 10 forward calls' } }
    };
    const [cm] = toCmDiagnostics('outs.append(model(b))', URI, [measured], () => undefined);
    expect(cm!.severity).toBe('info');
    expect(cm!.actions).toEqual([]);
    const box = renderMessage(measured, document);
    expect(box.querySelector('.jp-torchdoctor-measured')!.textContent).toBe(
      '320.0 KB of activations over 10 forward calls'
    );
  });
});

describe('inline code', () => {
  it('renders Markdown inline code as <code> and leaves a lone backtick', () => {
    expect(splitInlineCode('Replace `.view(` with `.reshape(`')).toEqual([
      { code: false, text: 'Replace ' },
      { code: true, text: '.view(' },
      { code: false, text: ' with ' },
      { code: true, text: '.reshape(' }
    ]);
    expect(plainText('Add `map_location="cpu"`')).toBe('Add map_location="cpu"');
    expect(plainText('a `` b`c `` d and one ` alone')).toBe('a b`c d and one ` alone');
    const span = document.createElement('span');
    span.append(...inlineCode('Use `x.t()` here'));
    expect(span.innerHTML).toBe('Use <code class="jp-torchdoctor-inline-code">x.t()</code> here');
  });
});
