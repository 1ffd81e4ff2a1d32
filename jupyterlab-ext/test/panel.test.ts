import { describe, expect, it } from 'vitest';

import { findingsByCell } from '../src/findings';
import { LiveState, toProbeResult } from '../src/live';
import { Diagnostic } from '../src/lsp';
import { CHINESE, ENGLISH, FindingsPanel, panelText } from '../src/panel';

const range = (line: number) => ({ start: { line, character: 0 }, end: { line, character: 4 } });
const d = (code: string, line: number, message: string, fixes: unknown[] = []): Diagnostic => ({
  range: range(line),
  message,
  code,
  source: 'torchdoctor',
  codeDescription: { href: `https://torchdoctor.dev/rules/${code}/` },
  data: { fixes }
});
const SAFE = { title: 'Use .reshape()', applicability: 'safe', edits: [{ range: [0, 0, 0, 4], newText: 'x' }] };

const CELLS = [
  { id: 'a', uri: 'cell-a', index: 0 },
  { id: 'b', uri: 'cell-b', index: 2 }
];
const DIAGNOSTICS: Record<string, Diagnostic[]> = {
  'cell-b': [
    d('TDR901', 0, 'Live (after In [2]): `y.view(-1)` fails', [SAFE]),
    d('TDR101', 0, '`.view()` on the result of `.t()` likely fails')
  ]
};
const X = { kind: 'tensor', shape: [4, 6], dtype: 'torch.float32', device: 'cpu', stride: [6, 1], is_contiguous: true, nbytes: 96, storage_nbytes: 96, requires_grad: false };
const Y = { ...X, shape: [6, 4], stride: [1, 6], is_contiguous: false, grad_fn: null };
const NET = { kind: 'module', type: 'torch.nn.modules.linear.Linear', training: true, devices: ['cpu'], num_parameters: 14, trainable_parameters: 14 };

function render(text = ENGLISH, live: LiveState | null = null) {
  const calls: string[] = [];
  const panel = new FindingsPanel(
    {
      jump: f => calls.push(`jump ${f.code}`),
      fix: (f, fix) => calls.push(`fix ${f.code} ${fix.title}`),
      fixAll: () => calls.push('fixAll'),
      refreshLive: () => calls.push('refresh'),
      measureCell: () => calls.push('measure')
    },
    text
  );
  panel.setFindings(findingsByCell(CELLS, uri => DIAGNOSTICS[uri] ?? []));
  panel.setLive(live);
  return { panel, node: panel.node, calls };
}

const ready: LiveState = {
  status: 'ready',
  busy: false,
  error: null,
  result: toProbeResult({ facts: { x: X, y: Y, net: NET }, scanned: ['x', 'y', 'net'], kernel: { torch: '2.13.0' } }, 2)
};

describe('FindingsPanel', () => {
  it('lists findings by cell with fix buttons', () => {
    const { node, calls } = render();
    expect([...node.querySelectorAll('.jp-torchdoctor-cells h3')].map(h => h.textContent)).toEqual(['Cell 3']);
    expect(node.querySelector('.jp-torchdoctor-status')!.textContent).toBe('2 findings, 1 with a safe fix');
    (node.querySelector('.jp-torchdoctor-cells .jp-torchdoctor-fix-safe') as HTMLButtonElement).click();
    (node.querySelector('.jp-torchdoctor-fix-all') as HTMLButtonElement).click();
    expect(calls).toEqual(['fix TDR901 Use .reshape()', 'fixAll']);
  });

  it('shows the live tensors and modules, and the live warnings', () => {
    const { node, calls } = render(ENGLISH, ready);
    const live = node.querySelector('.jp-torchdoctor-live')!;
    expect(live.querySelector('h2')!.textContent).toBe('Live tensors');
    expect(live.querySelector('.jp-torchdoctor-live-stamp')!.textContent).toBe('after In [2]');
    const y = live.querySelector<HTMLElement>('.jp-torchdoctor-live-tensor[data-name="y"]')!;
    expect(y.dataset).toMatchObject({ shape: '6,4', device: 'cpu', contiguous: 'false', strides: '1,6' });
    expect(y.querySelector('.jp-torchdoctor-live-head')!.textContent).toBe('y (6, 4) float32 cpu');
    expect(y.querySelector('.jp-torchdoctor-live-detail')!.textContent.trim()).toBe(
      'strides (1, 6) not contiguous 96 B no grad'
    );
    expect(y.querySelector('.jp-torchdoctor-live-contiguous')!.classList.contains('jp-torchdoctor-live-warn')).toBe(true);
    const net = live.querySelector<HTMLElement>('.jp-torchdoctor-live-module[data-name="net"]')!;
    expect(net.dataset).toMatchObject({ device: 'cpu', mode: 'train' });
    expect(net.querySelector('.jp-torchdoctor-live-mode')!.textContent).toBe('train mode');
    // Live warnings: the TDR9xx findings only, with their cell.
    const warnings = [...live.querySelectorAll<HTMLElement>('.jp-torchdoctor-live-warning')];
    expect(warnings.map(w => w.dataset.code)).toEqual(['TDR901']);
    expect(warnings[0]!.querySelector('.jp-torchdoctor-where')!.textContent).toBe('Cell 3, line 1');
    expect(warnings[0]!.querySelector('button')).toBeNull(); // its fix is in the list above
    (warnings[0]!.querySelector('.jp-torchdoctor-finding-main') as HTMLElement).click();
    (live.querySelector('.jp-torchdoctor-live-refresh') as HTMLButtonElement).click();
    expect(calls).toEqual(['jump TDR901', 'refresh']);
  });

  it('says why there is nothing live', () => {
    const note = (state: LiveState) =>
      render(ENGLISH, state).node.querySelector('.jp-torchdoctor-live .jp-torchdoctor-note')!.textContent;
    expect(note({ status: 'no-kernel', result: null, busy: false, error: null })).toMatch(/No kernel/);
    expect(note({ status: 'off', result: null, busy: false, error: null })).toMatch(/off/);
    expect(note({ ...ready, busy: true })).toMatch(/Kernel busy/);
    expect(note({ ...ready, result: toProbeResult({ facts: {}, scanned: [], kernel: { torch: null } }, 1) })).toMatch(
      /not imported/
    );
    expect(note({ ...ready, result: toProbeResult({ facts: {}, scanned: [], kernel: { torch: '2' } }, 1) })).toMatch(
      /No tensors/
    );
    expect(note({ status: 'error', result: null, busy: false, error: 'boom' })).toBe('Could not read the kernel: boom');
  });

  it('follows JupyterLab\'s language: Chinese for zh-CN', () => {
    expect(panelText('zh-CN')).toBe(CHINESE);
    expect(panelText('zh_TW')).toBe(CHINESE);
    expect(panelText('en')).toBe(ENGLISH);
    const { node } = render(CHINESE, ready);
    expect(node.querySelector('.jp-torchdoctor-status')!.textContent).toBe('2 个问题，1 个可安全修复');
    expect(node.querySelector('.jp-torchdoctor-fix-all')!.textContent).toBe('修复所有安全项');
    expect(node.querySelector('.jp-torchdoctor-cells h3')!.textContent).toBe('单元格 3');
    expect(node.querySelector('.jp-torchdoctor-live h2')!.textContent).toBe('实时张量');
    expect(node.querySelector('.jp-torchdoctor-live-stamp')!.textContent).toBe('In [2] 之后');
    expect(node.querySelector('[data-name="y"] .jp-torchdoctor-live-contiguous')!.textContent).toBe('不连续');
    expect(node.querySelector('[data-name="net"] .jp-torchdoctor-live-mode')!.textContent).toBe('训练模式');
    expect(node.querySelector('.jp-torchdoctor-live-warnings h3')!.textContent).toBe('实时警告');
  });

  it('shows what `torchdoctor run` measured next to a finding, and a measured-only finding', () => {
    const measured = { summary: '2.1 GB of activations over 157 batches', values: { bytes: 2254857830 } };
    const staticOne: Diagnostic = { ...d('TDR105', 1, 'Forward calls with gradients on'), data: { fixes: [], measured } };
    const runOnly: Diagnostic = {
      ...d('TDR105', 4, '1.0 GB of activations over 10 forward calls'),
      source: 'torchdoctor run',
      data: { measured: { summary: '1.0 GB of activations over 10 forward calls' } }
    };
    const other: Diagnostic = { ...d('E0', 2, 'pyflakes'), source: 'pyflakes' };
    for (const [text, label] of [
      [ENGLISH, 'measured: '],
      [CHINESE, '实测：']
    ] as const) {
      const { panel, node } = render(text);
      panel.setFindings(findingsByCell([{ id: 'file', uri: 'f', index: 0 }], () => [staticOne, runOnly, other]), 'file', 'eval.py');
      const rows = [...node.querySelectorAll<HTMLElement>('.jp-torchdoctor-cells .jp-torchdoctor-finding')];
      expect(rows.map(r => r.dataset.code)).toEqual(['TDR105', 'TDR105']);
      expect(rows.map(r => r.querySelector('.jp-torchdoctor-measured')?.textContent)).toEqual([
        `${label}2.1 GB of activations over 157 batches`,
        `${label}1.0 GB of activations over 10 forward calls`
      ]);
    }
  });

  it('offers "Measure this cell" for a notebook, not for a file', () => {
    const { panel, node, calls } = render();
    const button = node.querySelector<HTMLButtonElement>('.jp-torchdoctor-measure')!;
    expect(button.textContent).toBe('Measure this cell');
    button.click();
    expect(calls).toEqual(['measure']);
    panel.setFindings(findingsByCell([{ id: 'file', uri: 'cell-b', index: 0 }], uri => DIAGNOSTICS[uri] ?? []), 'file', 'train.py');
    expect(node.querySelector('.jp-torchdoctor-measure')).toBeNull();
    expect(render(CHINESE).node.querySelector('.jp-torchdoctor-measure')!.textContent).toBe('实测此单元格');
  });

  it('shows a Python file without cells and without a live section', () => {
    const { panel, node } = render(ENGLISH, ready);
    panel.setFindings(findingsByCell([{ id: 'file', uri: 'cell-b', index: 0 }], uri => DIAGNOSTICS[uri] ?? []), 'file', 'train.py');
    expect(node.querySelector('.jp-torchdoctor-cells h3')!.textContent).toBe('train.py');
    expect(node.querySelector('.jp-torchdoctor-live')).toBeNull();
    panel.setFindings(null);
    expect(node.querySelector('.jp-torchdoctor-note')!.textContent).toMatch(/Open a notebook or a Python file/);
  });
});
