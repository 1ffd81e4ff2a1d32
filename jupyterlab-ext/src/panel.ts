/**
 * The side panel: the current notebook's findings grouped by cell; a click on a finding
 * jumps to it; a button per fix; "Fix all safe" applies the notebook's fix-all.
 */

import { Widget } from '@lumino/widgets';

import { CellFindings, countFixable, Finding } from './findings';
import { Fix } from './lsp';

export interface PanelActions {
  jump(finding: Finding): void;
  fix(finding: Finding, fix: Fix): void;
  fixAll(): void;
}

export interface PanelText {
  title: string;
  noNotebook: string;
  noFindings: string;
  fixAllSafe: string;
  disconnected: string;
  cell: (n: number) => string;
  line: (n: number) => string;
  status: (findings: number, fixable: number) => string;
}

export const ENGLISH: PanelText = {
  title: 'torchdoctor',
  noNotebook: 'Open a notebook to see its PyTorch findings.',
  noFindings: 'No findings in this notebook.',
  fixAllSafe: 'Fix all safe',
  disconnected: 'The torchdoctor language server is not connected; reopen the notebook to retry.',
  cell: n => `Cell ${n}`,
  line: n => `line ${n}`,
  status: (findings, fixable) =>
    `${findings} finding${findings === 1 ? '' : 's'}, ${fixable} with a safe fix`
};

export const CHINESE: PanelText = {
  title: 'torchdoctor',
  noNotebook: '打开一个笔记本以查看其 PyTorch 问题。',
  noFindings: '此笔记本中没有问题。',
  fixAllSafe: '修复所有安全项',
  disconnected: 'torchdoctor 语言服务器未连接；重新打开笔记本即可重试。',
  cell: n => `单元格 ${n}`,
  line: n => `第 ${n} 行`,
  status: (findings, fixable) => `${findings} 个问题，${fixable} 个可安全修复`
};

export class FindingsPanel extends Widget {
  private groups: CellFindings[] = [];
  private hasNotebook = false;
  private problem: string | null = null;

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
    this.problem = problem;
    this.render();
  }

  setFindings(groups: CellFindings[] | null): void {
    this.hasNotebook = groups !== null;
    this.groups = groups ?? [];
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
    if (!this.hasNotebook) {
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
    if (total === 0) {
      node.append(note(doc, this.text.noFindings));
      return;
    }
    const list = doc.createElement('div');
    list.className = 'jp-torchdoctor-cells';
    for (const group of this.groups) {
      const section = doc.createElement('section');
      section.className = 'jp-torchdoctor-cell';
      section.dataset.cellId = group.cell.id;
      const heading = doc.createElement('h3');
      heading.textContent = this.text.cell(group.cell.index + 1);
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

  private row(doc: Document, finding: Finding): HTMLElement {
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
    message.textContent = finding.diagnostic.message;
    const where = doc.createElement('span');
    where.className = 'jp-torchdoctor-where';
    where.textContent = this.text.line(finding.diagnostic.range.start.line + 1);
    main.append(code, ' ', message, ' ', where);
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
    if (finding.fixes.length > 0) {
      const buttons = doc.createElement('div');
      buttons.className = 'jp-torchdoctor-fixes';
      for (const fix of finding.fixes) {
        const button = doc.createElement('button');
        button.className = `jp-Button jp-mod-styled jp-torchdoctor-fix jp-torchdoctor-fix-${fix.applicability}`;
        button.textContent = fix.title;
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

function note(doc: Document, text: string): HTMLElement {
  const p = doc.createElement('p');
  p.className = 'jp-torchdoctor-note';
  p.textContent = text;
  return p;
}
