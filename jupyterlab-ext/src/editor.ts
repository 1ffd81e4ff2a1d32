/**
 * Findings in a cell's CodeMirror editor: underlines (marks with torchdoctor's class), and a
 * tooltip with the rule's code linking to its page, the message, and one button per fix
 * (safe or unsafe). A fix is applied as one editor transaction, so Ctrl+Z undoes it.
 */

import { Action, Diagnostic as CmDiagnostic, setDiagnostics } from '@codemirror/lint';
import { EditorView } from '@codemirror/view';

import { codeOf, Diagnostic, Fix, fixesOf, offsetAt, severityName, SOURCE, TextEdit, toChanges } from './lsp';

export const MARK_CLASS = 'jp-torchdoctor-mark';

export interface FixHandler {
  (fix: Fix, diagnostic: Diagnostic): void;
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
  message.textContent = diagnostic.message;
  box.append(codeEl, ' ', message);
  return box;
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
    if (diagnostic.source !== SOURCE) {
      continue;
    }
    const from = offsetAt(text, diagnostic.range.start);
    let to = offsetAt(text, diagnostic.range.end);
    if (to < from) {
      to = from;
    }
    const actions: Action[] = fixesOf(diagnostic, uri).map(fix => ({
      name: fix.title,
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
      renderMessage: view => renderMessage(diagnostic, view.dom.ownerDocument),
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
