import * as vscode from "vscode";
import { vsdiag, type ProvideDiagnosticSignature } from "vscode-languageclient/node";

const CELL_SCHEME = "vscode-notebook-cell";

/**
 * The findings of notebook cells, kept in a collection of the extension's own.
 *
 * vscode-languageclient pulls the diagnostics of a cell only while the cell's editor is on
 * screen (or after a refresh), and forgets them when the cell scrolls out of view: the findings
 * of a long notebook's other cells were missing from the Problems panel. Here every pull answer
 * for a cell goes to this collection (the client's own gets an empty list, so nothing shows
 * twice), a cell's findings stay until a later answer, the cell's removal or the notebook's
 * closing, and a refresh when a notebook comes into view pulls all its cells at once.
 */
export class CellDiagnostics implements vscode.Disposable {
  private readonly collection: vscode.DiagnosticCollection;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(name: string) {
    this.collection = vscode.languages.createDiagnosticCollection(name);
    this.disposables.push(
      vscode.workspace.onDidCloseNotebookDocument((notebook) => {
        for (const cell of notebook.getCells()) this.collection.delete(cell.document.uri);
      }),
      vscode.workspace.onDidChangeNotebookDocument((event) => {
        for (const change of event.contentChanges) {
          for (const cell of change.removedCells) this.collection.delete(cell.document.uri);
        }
      }),
    );
  }

  /** Middleware for `provideDiagnostics`: a cell's answer is kept here. */
  readonly provideDiagnostics = async (
    document: vscode.TextDocument | vscode.Uri,
    previousResultId: string | undefined,
    token: vscode.CancellationToken,
    next: ProvideDiagnosticSignature,
  ): Promise<vsdiag.DocumentDiagnosticReport | undefined | null> => {
    const report = await next(document, previousResultId, token);
    const uri = document instanceof vscode.Uri ? document : document.uri;
    if (uri.scheme !== CELL_SCHEME || report === undefined || report === null) return report;
    if (report.kind !== vsdiag.DocumentDiagnosticReportKind.full) return report;
    this.collection.set(uri, report.items);
    return { kind: vsdiag.DocumentDiagnosticReportKind.full, resultId: report.resultId, items: [] };
  };

  /**
   * Calls `refresh` (a pull of every open document) whenever a notebook's tab opens, and once
   * now. Register it after the client: the client counts a notebook as visible once its own
   * listener of the same event has seen the tab.
   */
  refreshOnNotebooks(refresh: () => void): vscode.Disposable {
    refresh();
    return vscode.window.tabGroups.onDidChangeTabs((event) => {
      if (event.opened.some((tab) => tab.input instanceof vscode.TabInputNotebook)) refresh();
    });
  }

  clear(): void {
    this.collection.clear();
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
    this.collection.dispose();
  }
}
