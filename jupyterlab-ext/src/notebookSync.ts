/**
 * LSP 3.17 notebook document sync, cell by cell: `notebookDocument/didOpen` with every code
 * cell, then `notebookDocument/didChange` carrying only what changed (the text of the cells
 * that were edited, a structure change for cells added, removed or moved), and
 * `notebookDocument/didClose`. Pure: it turns snapshots of the notebook's code cells into
 * messages; the JupyterLab side takes the snapshots.
 */

export interface CellSnapshot {
  /** The cell's id in the notebook (nbformat 4.5 cell id). */
  id: string;
  text: string;
}

export type Send = (method: string, params: unknown) => void;

const CODE_CELL = 2;

interface Synced {
  id: string;
  uri: string;
  text: string;
  version: number;
}

/** The URI of a cell of the notebook at `notebookPath` (an absolute path). */
export function cellUri(notebookPath: string, cellId: string): string {
  const path = notebookPath.startsWith('/') ? notebookPath : `/${notebookPath}`;
  return `vscode-notebook-cell:${encodeURI(path)}#${encodeURIComponent(cellId)}`;
}

export class NotebookSync {
  private cells: Synced[] = [];
  private version = 0;
  private opened = false;

  constructor(
    readonly notebookUri: string,
    private readonly notebookPath: string,
    private readonly send: Send
  ) {}

  get isOpen(): boolean {
    return this.opened;
  }

  uriOf(cellId: string): string {
    return cellUri(this.notebookPath, cellId);
  }

  /** The id of the cell a URI names (undefined for a URI of no cell of this notebook). */
  cellIdOf(uri: string): string | undefined {
    return this.cells.find(c => c.uri === uri)?.id;
  }

  textOf(uri: string): string | undefined {
    return this.cells.find(c => c.uri === uri)?.text;
  }

  open(cells: readonly CellSnapshot[]): void {
    this.cells = cells.map(c => ({ id: c.id, uri: this.uriOf(c.id), text: c.text, version: 1 }));
    this.version = 1;
    this.opened = true;
    this.send('notebookDocument/didOpen', {
      notebookDocument: {
        uri: this.notebookUri,
        notebookType: 'jupyter-notebook',
        version: this.version,
        cells: this.cells.map(c => ({ kind: CODE_CELL, document: c.uri }))
      },
      cellTextDocuments: this.cells.map(c => ({
        uri: c.uri,
        languageId: 'python',
        version: c.version,
        text: c.text
      }))
    });
  }

  /** Send what changed since the last snapshot; nothing when nothing did. */
  update(cells: readonly CellSnapshot[]): boolean {
    if (!this.opened) {
      this.open(cells);
      return true;
    }
    const old = this.cells;
    const oldIds = old.map(c => c.id);
    const newIds = cells.map(c => c.id);
    let prefix = 0;
    while (prefix < oldIds.length && prefix < newIds.length && oldIds[prefix] === newIds[prefix]) {
      prefix++;
    }
    let suffix = 0;
    while (
      suffix < oldIds.length - prefix &&
      suffix < newIds.length - prefix &&
      oldIds[oldIds.length - 1 - suffix] === newIds[newIds.length - 1 - suffix]
    ) {
      suffix++;
    }
    const byId = new Map(old.map(c => [c.id, c]));
    const next: Synced[] = cells.map(
      c => byId.get(c.id) ?? { id: c.id, uri: this.uriOf(c.id), text: c.text, version: 0 }
    );
    const change: Record<string, unknown> = {};
    const structural = prefix !== oldIds.length || prefix !== newIds.length;
    if (structural) {
      const removed = old.slice(prefix, old.length - suffix);
      const inserted = next.slice(prefix, next.length - suffix);
      const newSet = new Set(newIds);
      const opened = inserted.filter(c => c.version === 0);
      for (const c of opened) {
        c.version = 1;
      }
      change.structure = {
        array: {
          start: prefix,
          deleteCount: removed.length,
          cells: inserted.map(c => ({ kind: CODE_CELL, document: c.uri }))
        },
        didOpen: opened.map(c => ({
          uri: c.uri,
          languageId: 'python',
          version: c.version,
          text: c.text
        })),
        didClose: removed.filter(c => !newSet.has(c.id)).map(c => ({ uri: c.uri }))
      };
    }
    const textContent = [];
    for (const [i, cell] of cells.entries()) {
      const synced = next[i];
      if (synced !== undefined && synced.text !== cell.text) {
        synced.text = cell.text;
        synced.version++;
        textContent.push({
          document: { uri: synced.uri, version: synced.version },
          changes: [{ text: cell.text }]
        });
      }
    }
    if (textContent.length > 0) {
      change.textContent = textContent;
    }
    this.cells = next;
    if (!structural && textContent.length === 0) {
      return false;
    }
    this.version++;
    this.send('notebookDocument/didChange', {
      notebookDocument: { uri: this.notebookUri, version: this.version },
      change: { cells: change }
    });
    return true;
  }

  close(): void {
    if (!this.opened) {
      return;
    }
    this.opened = false;
    this.send('notebookDocument/didClose', {
      notebookDocument: { uri: this.notebookUri },
      cellTextDocuments: this.cells.map(c => ({ uri: c.uri }))
    });
    this.cells = [];
  }
}
