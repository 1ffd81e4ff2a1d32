/**
 * The side panel: the current notebook's (or Python file's) findings grouped by cell; a click
 * on a finding jumps to it; a button per fix; "Fix all safe" applies the notebook's fix-all.
 * For a notebook, the "Live tensors" section: the kernel's tensors and modules and the live
 * warnings (TDR901-TDR904).
 */

import { Widget } from '@lumino/widgets';

import { inlineCode } from './editor';
import { CellFindings, countFixable, Finding } from './findings';
import { LIVE_CODES, LiveItem, liveItems, LiveState, torchImported } from './live';
import { Fix, measuredOf } from './lsp';

export interface PanelActions {
  jump(finding: Finding): void;
  fix(finding: Finding, fix: Fix): void;
  fixAll(): void;
  refreshLive(): void;
  /** Run the active cell under `%%torchdoctor run` (the user's click). */
  measureCell(): void;
}

export interface PanelText {
  title: string;
  noNotebook: string;
  noFindings: string;
  noFindingsFile: string;
  fixAllSafe: string;
  measureCell: string;
  measureCellTip: string;
  disconnected: string;
  reconnecting: string;
  cell: (n: number) => string;
  line: (n: number) => string;
  measured: (summary: string) => string;
  status: (findings: number, fixable: number) => string;
  liveTitle: string;
  liveOff: string;
  liveNoKernel: string;
  liveWaiting: string;
  liveBusy: string;
  liveNoTorch: string;
  liveEmpty: string;
  liveError: (reason: string) => string;
  liveStamp: (n: number) => string;
  liveWarnings: string;
  liveTensors: string;
  liveModules: string;
  liveStrides: (strides: string) => string;
  liveContiguous: string;
  liveNotContiguous: string;
  liveChannelsLast: string;
  liveStorage: (size: string) => string;
  liveNoGrad: string;
  liveUnreadable: string;
  liveTrain: string;
  liveEval: string;
  liveParameters: (n: string, trainable: string | null) => string;
  liveNoParameters: string;
  liveTruncated: string;
  refresh: string;
}

export const ENGLISH: PanelText = {
  title: 'torchdoctor',
  noNotebook: 'Open a notebook or a Python file to see its PyTorch findings.',
  noFindings: 'No findings in this notebook.',
  noFindingsFile: 'No findings in this file.',
  fixAllSafe: 'Fix all safe',
  measureCell: 'Measure this cell',
  measureCellTip:
    'Run the active cell in the kernel under %%torchdoctor run and show what it measured next to the findings',
  disconnected: 'The torchdoctor language server is not connected.',
  reconnecting: 'The torchdoctor language server is not connected; reconnecting…',
  cell: n => `Cell ${n}`,
  line: n => `line ${n}`,
  measured: summary => `measured: ${summary}`,
  status: (findings, fixable) =>
    `${findings} finding${findings === 1 ? '' : 's'}, ${fixable} with a safe fix`,
  liveTitle: 'Live tensors',
  liveOff: 'Live facts are off (the "Live facts from the kernel" setting).',
  liveNoKernel: 'No kernel: start the notebook\'s kernel and run a cell.',
  liveWaiting: 'Reading the kernel…',
  liveBusy: 'Kernel busy: the list refreshes when the running cell finishes.',
  liveNoTorch: 'torch is not imported in the kernel yet.',
  liveEmpty: 'No tensors or modules in the kernel yet: run a cell that makes one.',
  liveError: reason => `Could not read the kernel: ${reason}`,
  liveStamp: n => `after In [${n}]`,
  liveWarnings: 'Live warnings',
  liveTensors: 'Tensors',
  liveModules: 'Modules',
  liveStrides: strides => `strides ${strides}`,
  liveContiguous: 'contiguous',
  liveNotContiguous: 'not contiguous',
  liveChannelsLast: 'channels_last',
  liveStorage: size => `storage ${size}`,
  liveNoGrad: 'no grad',
  liveUnreadable: 'not read (a subclass with __torch_dispatch__)',
  liveTrain: 'train mode',
  liveEval: 'eval mode',
  liveParameters: (n, trainable) =>
    trainable === null ? `${n} parameters` : `${n} parameters (${trainable} trainable)`,
  liveNoParameters: 'no parameters',
  liveTruncated: 'partly read (time limit)',
  refresh: 'Refresh'
};

export const CHINESE: PanelText = {
  title: 'torchdoctor',
  noNotebook: '打开一个笔记本或 Python 文件以查看其 PyTorch 问题。',
  noFindings: '此笔记本中没有问题。',
  noFindingsFile: '此文件中没有问题。',
  fixAllSafe: '修复所有安全项',
  measureCell: '实测此单元格',
  measureCellTip: '在内核中以 %%torchdoctor run 运行当前单元格，并在问题旁显示实测结果',
  disconnected: 'torchdoctor 语言服务器未连接。',
  reconnecting: 'torchdoctor 语言服务器未连接；正在重新连接…',
  cell: n => `单元格 ${n}`,
  line: n => `第 ${n} 行`,
  measured: summary => `实测：${summary}`,
  status: (findings, fixable) => `${findings} 个问题，${fixable} 个可安全修复`,
  liveTitle: '实时张量',
  liveOff: '实时事实已关闭（“来自内核的实时事实”设置）。',
  liveNoKernel: '没有内核：启动笔记本的内核并运行一个单元格。',
  liveWaiting: '正在读取内核…',
  liveBusy: '内核忙：当前单元格运行结束后列表会刷新。',
  liveNoTorch: '内核中尚未导入 torch。',
  liveEmpty: '内核中还没有张量或模块：运行一个创建它们的单元格。',
  liveError: reason => `无法读取内核：${reason}`,
  liveStamp: n => `In [${n}] 之后`,
  liveWarnings: '实时警告',
  liveTensors: '张量',
  liveModules: '模块',
  liveStrides: strides => `步长 ${strides}`,
  liveContiguous: '连续',
  liveNotContiguous: '不连续',
  liveChannelsLast: 'channels_last',
  liveStorage: size => `存储 ${size}`,
  liveNoGrad: '无梯度',
  liveUnreadable: '未读取（带 __torch_dispatch__ 的子类）',
  liveTrain: '训练模式',
  liveEval: '评估模式',
  liveParameters: (n, trainable) =>
    trainable === null ? `${n} 个参数` : `${n} 个参数（${trainable} 个可训练）`,
  liveNoParameters: '无参数',
  liveTruncated: '只读取了一部分（时间限制）',
  refresh: '刷新'
};

/** The panel's text for a JupyterLab language code (`zh-CN`, `en`, ...). */
export function panelText(languageCode: string): PanelText {
  return languageCode.toLowerCase().startsWith('zh') ? CHINESE : ENGLISH;
}

/** What the panel shows: a notebook's cells, or one Python file. */
export type DocumentKind = 'notebook' | 'file';

export class FindingsPanel extends Widget {
  private groups: CellFindings[] = [];
  private kind: DocumentKind | null = null;
  private fileName = '';
  private problem: string | null = null;
  private live: LiveState | null = null;

  constructor(
    private readonly actions: PanelActions,
    private text: PanelText
  ) {
    super();
    this.id = 'jp-torchdoctor-panel';
    this.addClass('jp-torchdoctor-panel');
    this.title.caption = text.title;
    this.render();
  }

  setText(text: PanelText): void {
    this.text = text;
    this.render();
  }

  /** A connection problem to show above the findings (null: none). */
  setProblem(problem: string | null): void {
    if (problem === this.problem) {
      return;
    }
    this.problem = problem;
    this.render();
  }

  /** The current document's findings (null: no notebook or file is current). */
  setFindings(groups: CellFindings[] | null, kind: DocumentKind = 'notebook', fileName = ''): void {
    this.kind = groups === null ? null : kind;
    this.groups = groups ?? [];
    this.fileName = fileName;
    this.render();
  }

  /** The current notebook's live section (null: hidden, as for a file). */
  setLive(state: LiveState | null): void {
    this.live = state;
    this.render();
  }

  private render(): void {
    const doc = this.node.ownerDocument;
    const node = this.node;
    node.replaceChildren();
    const header = doc.createElement('div');
    header.className = 'jp-torchdoctor-header';
    const title = doc.createElement('h2');
    title.textContent = this.text.title;
    header.append(title);
    node.append(header);
    if (this.problem !== null) {
      const problem = note(doc, this.problem);
      problem.classList.add('jp-torchdoctor-problem');
      node.append(problem);
    }
    if (this.kind === null) {
      node.append(note(doc, this.text.noNotebook));
      return;
    }
    const total = this.groups.reduce((n, g) => n + g.findings.length, 0);
    const fixable = countFixable(this.groups, false);
    const status = doc.createElement('div');
    status.className = 'jp-torchdoctor-status';
    status.textContent = this.text.status(total, fixable);
    const fixAll = doc.createElement('button');
    fixAll.className = 'jp-Button jp-mod-styled jp-mod-accept jp-torchdoctor-fix-all';
    fixAll.textContent = this.text.fixAllSafe;
    fixAll.disabled = fixable === 0;
    fixAll.addEventListener('click', () => {
      this.actions.fixAll();
    });
    header.append(status, fixAll);
    if (this.kind === 'notebook') {
      const measure = doc.createElement('button');
      measure.className = 'jp-Button jp-mod-styled jp-torchdoctor-measure';
      measure.textContent = this.text.measureCell;
      measure.title = this.text.measureCellTip;
      measure.addEventListener('click', () => {
        this.actions.measureCell();
      });
      header.append(measure);
    }
    if (total === 0) {
      node.append(note(doc, this.kind === 'file' ? this.text.noFindingsFile : this.text.noFindings));
    } else {
      const list = doc.createElement('div');
      list.className = 'jp-torchdoctor-cells';
      for (const group of this.groups) {
        const section = doc.createElement('section');
        section.className = 'jp-torchdoctor-cell';
        section.dataset.cellId = group.cell.id;
        const heading = doc.createElement('h3');
        heading.textContent = this.kind === 'file' ? this.fileName : this.text.cell(group.cell.index + 1);
        section.append(heading);
        const ul = doc.createElement('ul');
        for (const finding of group.findings) {
          ul.append(this.row(doc, finding));
        }
        section.append(ul);
        list.append(section);
      }
      node.append(list);
    }
    if (this.kind === 'notebook' && this.live !== null) {
      node.append(this.liveSection(doc, this.live));
    }
  }

  private liveSection(doc: Document, live: LiveState): HTMLElement {
    const text = this.text;
    const section = doc.createElement('section');
    section.className = 'jp-torchdoctor-live';
    section.dataset.status = live.status;
    section.dataset.busy = String(live.busy);
    const heading = doc.createElement('div');
    heading.className = 'jp-torchdoctor-live-heading';
    const h = doc.createElement('h2');
    h.textContent = text.liveTitle;
    heading.append(h);
    const count = live.result?.executionCount;
    if (typeof count === 'number' && count > 0) {
      const stamp = doc.createElement('span');
      stamp.className = 'jp-torchdoctor-live-stamp';
      stamp.textContent = text.liveStamp(count);
      heading.append(stamp);
    }
    if (live.status !== 'off' && live.status !== 'no-kernel') {
      const refresh = doc.createElement('button');
      refresh.className = 'jp-Button jp-mod-styled jp-torchdoctor-live-refresh';
      refresh.textContent = text.refresh;
      refresh.addEventListener('click', () => {
        this.actions.refreshLive();
      });
      heading.append(refresh);
    }
    section.append(heading);

    const warnings = this.groups.flatMap(g => g.findings).filter(f => LIVE_CODES.has(f.code));
    if (warnings.length > 0) {
      const box = doc.createElement('div');
      box.className = 'jp-torchdoctor-live-warnings';
      const h3 = doc.createElement('h3');
      h3.textContent = text.liveWarnings;
      const ul = doc.createElement('ul');
      for (const finding of warnings) {
        const li = this.row(doc, finding, true);
        li.classList.add('jp-torchdoctor-live-warning');
        ul.append(li);
      }
      box.append(h3, ul);
      section.append(box);
    }

    if (live.busy) {
      section.append(note(doc, text.liveBusy, 'jp-torchdoctor-live-busy'));
    }
    switch (live.status) {
      case 'off':
        section.append(note(doc, text.liveOff));
        return section;
      case 'no-kernel':
        section.append(note(doc, text.liveNoKernel));
        return section;
      case 'waiting':
        if (!live.busy) {
          section.append(note(doc, text.liveWaiting));
        }
        return section;
      case 'error':
        section.append(note(doc, text.liveError(live.error ?? '?'), 'jp-torchdoctor-problem'));
        break;
      case 'ready':
        break;
    }
    const result = live.result;
    if (result === null) {
      return section;
    }
    if (!torchImported(result)) {
      section.append(note(doc, text.liveNoTorch));
      return section;
    }
    const items = liveItems(result, text);
    if (items.length === 0) {
      section.append(note(doc, text.liveEmpty));
      return section;
    }
    for (const kind of ['tensor', 'module'] as const) {
      const mine = items.filter(i => i.kind === kind);
      if (mine.length === 0) {
        continue;
      }
      const h3 = doc.createElement('h3');
      h3.textContent = kind === 'tensor' ? text.liveTensors : text.liveModules;
      const ul = doc.createElement('ul');
      ul.className = 'jp-torchdoctor-live-list';
      for (const item of mine) {
        ul.append(liveRow(doc, item));
      }
      section.append(h3, ul);
    }
    return section;
  }

  /** One finding; in the live section (`withCell`) its cell and line, without fix buttons
   * (they are in the list above). */
  private row(doc: Document, finding: Finding, withCell = false): HTMLElement {
    const li = doc.createElement('li');
    li.className = 'jp-torchdoctor-finding';
    li.dataset.code = finding.code;
    const main = doc.createElement('div');
    main.className = 'jp-torchdoctor-finding-main';
    main.tabIndex = 0;
    const code = doc.createElement('a');
    code.className = 'jp-torchdoctor-code';
    code.textContent = finding.code;
    const href = finding.diagnostic.codeDescription?.href;
    if (href) {
      code.href = href;
      code.target = '_blank';
      code.rel = 'noopener';
      code.addEventListener('click', event => {
        event.stopPropagation();
      });
    }
    const message = doc.createElement('span');
    message.className = 'jp-torchdoctor-message';
    message.append(...inlineCode(finding.diagnostic.message, doc));
    const where = doc.createElement('span');
    where.className = 'jp-torchdoctor-where';
    const line = this.text.line(finding.diagnostic.range.start.line + 1);
    where.textContent = withCell ? `${this.text.cell(finding.cell.index + 1)}, ${line}` : line;
    main.append(code, ' ', message, ' ', where);
    const measured = measuredOf(finding.diagnostic);
    if (measured !== null) {
      // What `torchdoctor run` measured there (the last report of the file).
      const span = doc.createElement('span');
      span.className = 'jp-torchdoctor-measured';
      span.textContent = this.text.measured(measured);
      main.append(' ', span);
    }
    const jump = () => {
      this.actions.jump(finding);
    };
    main.addEventListener('click', jump);
    main.addEventListener('keydown', event => {
      if (event.key === 'Enter') {
        jump();
      }
    });
    li.append(main);
    if (finding.fixes.length > 0 && !withCell) {
      const buttons = doc.createElement('div');
      buttons.className = 'jp-torchdoctor-fixes';
      for (const fix of finding.fixes) {
        const button = doc.createElement('button');
        button.className = `jp-Button jp-mod-styled jp-torchdoctor-fix jp-torchdoctor-fix-${fix.applicability}`;
        button.append(...inlineCode(fix.title, doc));
        button.addEventListener('click', () => {
          this.actions.fix(finding, fix);
        });
        buttons.append(button);
      }
      li.append(buttons);
    }
    return li;
  }
}

const HEAD_FIELDS = new Set(['type', 'shape', 'dtype', 'device']);

/** One tensor or module of the live section. */
export function liveRow(doc: Document, item: LiveItem): HTMLElement {
  const li = doc.createElement('li');
  li.className = `jp-torchdoctor-live-item jp-torchdoctor-live-${item.kind}`;
  li.dataset.name = item.name;
  for (const [key, value] of Object.entries(item.attrs)) {
    li.dataset[key] = value;
  }
  // First line: name, type, shape, dtype, device; second line: the rest.
  const head = doc.createElement('div');
  head.className = 'jp-torchdoctor-live-head';
  const detail = doc.createElement('div');
  detail.className = 'jp-torchdoctor-live-detail';
  const name = doc.createElement('code');
  name.className = 'jp-torchdoctor-live-name';
  name.textContent = item.name;
  head.append(name);
  for (const field of item.fields) {
    const span = doc.createElement('span');
    span.className = `jp-torchdoctor-live-field jp-torchdoctor-live-${field.key}`;
    if (field.warn) {
      span.classList.add('jp-torchdoctor-live-warn');
    }
    span.textContent = field.text;
    const inHead = HEAD_FIELDS.has(field.key) && !(item.kind === 'module' && field.key === 'device');
    (inHead ? head : detail).append(' ', span);
  }
  li.append(head);
  if (detail.childElementCount > 0) {
    li.append(detail);
  }
  return li;
}

function note(doc: Document, text: string, extra?: string): HTMLElement {
  const p = doc.createElement('p');
  p.className = 'jp-torchdoctor-note';
  if (extra) {
    p.classList.add(extra);
  }
  p.textContent = text;
  return p;
}
