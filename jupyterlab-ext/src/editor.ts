/**
 * Findings in a cell's CodeMirror editor: underlines (marks with torchdoctor's class), and a
 * tooltip with the rule's code linking to its page, the message, and one button per fix
 * (safe or unsafe). A fix is applied as one editor transaction, so Ctrl+Z undoes it.
 */

import { Action, Diagnostic as CmDiagnostic, setDiagnostics } from '@codemirror/lint';
import { EditorView } from '@codemirror/view';

import { codeOf, Diagnostic, Fix, fixesOf, isOurs, measuredOf, offsetAt, severityName, SOURCE, TextEdit, toChanges } from './lsp';

export const MARK_CLASS = 'jp-torchdoctor-mark';

export interface FixHandler {
  (fix: Fix, diagnostic: Diagnostic): void;
}

/** `text` cut into plain parts and Markdown inline code spans (`` `x.view(-1)` ``). A backtick
 * without its pair stays as it is. */
export function splitInlineCode(text: string): { code: boolean; text: string }[] {
  const out: { code: boolean; text: string }[] = [];
  const pattern = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    const start = match.index;
    if (start > last) {
      out.push({ code: false, text: text.slice(last, start) });
    }
    out.push({ code: true, text: (match[2] ?? '').replace(/^ (.*) $/s, '$1') });
    last = start + match[0].length;
  }
  if (last < text.length) {
    out.push({ code: false, text: text.slice(last) });
  }
  return out;
}

/** `text` with its inline code as `<code>` elements: the nodes to append. */
export function inlineCode(text: string, doc: Document = document): (string | HTMLElement)[] {
  return splitInlineCode(text).map(part => {
    if (!part.code) {
      return part.text;
    }
    const code = doc.createElement('code');
    code.className = 'jp-torchdoctor-inline-code';
    code.textContent = part.text;
    return code;
  });
}

/** `text` without the backticks of its inline code, for plain-text places (labels). */
export function plainText(text: string): string {
  return splitInlineCode(text)
    .map(part => part.text)
    .join('');
}

/** The rule code (a link to its page) and the message, as the tooltip shows them. */
export function renderMessage(diagnostic: Diagnostic, doc: Document = document): HTMLElement {
  const box = doc.createElement('span');
  box.className = 'jp-torchdoctor-diagnostic';
  const code = codeOf(diagnostic);
  const href = diagnostic.codeDescription?.href;
  const codeEl = doc.createElement(href ? 'a' : 'span');
  codeEl.className = 'jp-torchdoctor-code';
  codeEl.textContent = code;
  if (href && codeEl instanceof HTMLAnchorElement) {
    codeEl.href = href;
    codeEl.target = '_blank';
    codeEl.rel = 'noopener';
  }
  const message = doc.createElement('span');
  message.className = 'jp-torchdoctor-message';
  message.append(...inlineCode(diagnostic.message, doc));
  box.append(codeEl, ' ', message);
  const measured = measuredOf(diagnostic);
  if (measured !== null) {
    const span = doc.createElement('span');
    span.className = 'jp-torchdoctor-measured';
    span.textContent = measured;
    box.append(' (', span, ')');
  }
  return box;
}

/** Show the inline code of the fix buttons' labels, which CodeMirror writes as plain text: the
 * buttons follow the message in the same list item, once CodeMirror has built it. */
function renderFixLabels(box: HTMLElement, titles: readonly string[]): void {
  queueMicrotask(() => {
    const item = box.parentElement?.parentElement;
    if (!item) {
      return;
    }
    const buttons = item.querySelectorAll(':scope > button.cm-diagnosticAction');
    buttons.forEach((button, i) => {
      const title = titles[i];
      // In CodeMirror's lint panel a label carries its access key (<u>): left as it is.
      if (title !== undefined && button.querySelector('u') === null) {
        button.replaceChildren(...inlineCode(title, button.ownerDocument));
      }
    });
  });
}

/** CodeMirror diagnostics for a cell's findings, in offsets of `text`. */
export function toCmDiagnostics(
  text: string,
  uri: string,
  diagnostics: readonly Diagnostic[],
  onFix: FixHandler
): CmDiagnostic[] {
  const out: CmDiagnostic[] = [];
  for (const diagnostic of diagnostics) {
    if (!isOurs(diagnostic)) {
      continue;
    }
    const from = offsetAt(text, diagnostic.range.start);
    let to = offsetAt(text, diagnostic.range.end);
    if (to < from) {
      to = from;
    }
    const fixes = fixesOf(diagnostic, uri);
    const actions: Action[] = fixes.map(fix => ({
      name: plainText(fix.title),
      markClass: `jp-torchdoctor-fix jp-torchdoctor-fix-${fix.applicability}`,
      apply: () => {
        onFix(fix, diagnostic);
      }
    }));
    const severity = severityName(diagnostic.severity);
    out.push({
      from,
      to,
      severity,
      source: SOURCE,
      message: `${codeOf(diagnostic)} ${diagnostic.message}`,
      markClass: `${MARK_CLASS} ${MARK_CLASS}-${codeOf(diagnostic)}`,
      renderMessage: view => {
        const box = renderMessage(diagnostic, view.dom.ownerDocument);
        renderFixLabels(
          box,
          fixes.map(fix => fix.title)
        );
        return box;
      },
      actions
    });
  }
  return out;
}

/** Show these findings in the editor (replacing the ones shown before). */
export function paint(
  view: EditorView,
  uri: string,
  diagnostics: readonly Diagnostic[],
  onFix: FixHandler
): void {
  const text = view.state.doc.toString();
  const cm = toCmDiagnostics(text, uri, diagnostics, onFix);
  view.dispatch(setDiagnostics(view.state, cm));
}

/** Apply edits to the editor's document as one transaction (one undo step). */
export function applyToView(view: EditorView, edits: readonly TextEdit[]): void {
  const text = view.state.doc.toString();
  view.dispatch({ changes: toChanges(text, edits), userEvent: 'input.torchdoctor.fix' });
}

/** What a shared text model (a cell's or a file's) offers to edits made without its editor. */
export interface SharedSource {
  getSource(): string;
  updateSource(start: number, end: number, value: string): void;
  transact(f: () => void): void;
}

/** Apply LSP edits to a shared text model whose editor is not open, in one transaction. */
export function applyToShared(shared: SharedSource, edits: readonly TextEdit[]): void {
  const text = shared.getSource();
  shared.transact(() => {
    for (const change of toChanges(text, edits)) {
      shared.updateSource(change.from, change.to, change.insert);
    }
  });
}
