/**
 * A document as the language server sees it: a notebook (synced cell by cell, with its live
 * section) or a Python file in the file editor (text document sync). Each paints its
 * findings in its CodeMirror editors, answers hovers, applies fixes as one undo step per
 * editor, and can be re-opened on a new connection after the old one dropped.
 */

import { CodeCell } from '@jupyterlab/cells';
import { CodeMirrorEditor } from '@jupyterlab/codemirror';
import { IDocumentWidget } from '@jupyterlab/docregistry';
import { FileEditor } from '@jupyterlab/fileeditor';
import { NotebookPanel } from '@jupyterlab/notebook';
import { OutputArea } from '@jupyterlab/outputarea';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { StateEffect } from '@codemirror/state';
import { EditorView, hoverTooltip } from '@codemirror/view';

import { LanguageClient } from './client';
import { applyToShared, applyToView, paint } from './editor';
import { CellRef, Finding } from './findings';
import { ExecuteReplyContent, IopubMessage, LiveController, ProbeKernel } from './kernelProbe';
import { LiveState, ProbeHelper } from './live';
import { Fix, TextEdit } from './lsp';
import { measureCode, reportsUri } from './measure';
import { CellSnapshot, NotebookSync } from './notebookSync';
import { DocumentKind } from './panel';
import { TextDocumentSync } from './textSync';

const SYNC_DELAY_MS = 60;

export interface BindingHost {
  /** Findings or the live section of this document changed. */
  changed(binding: Binding): void;
  rendermime: IRenderMimeRegistry | null;
}

/** What the plugin and the panel need of a bound document. */
export interface Binding {
  readonly kind: DocumentKind;
  /** The name the panel shows for a file. */
  readonly name: string;
  readonly live: LiveController | null;
  cells(): CellRef[];
  owns(uri: string): boolean;
  published(uri: string): void;
  applyEdits(edits: Map<string, TextEdit[]>): boolean;
  /** Whether these edits still fit the text the server saw. */
  canApply(edits: Map<string, TextEdit[]>): boolean;
  applyFix(fix: Fix): void;
  jump(finding: Finding): void;
  /** Open the document on this connection (null: the connection dropped). */
  attach(client: LanguageClient | null): void;
  dispose(): void;
}

/** Painting, hovers and edits shared by notebooks and files. */
abstract class EditorBinding {
  protected client: LanguageClient | null = null;
  private readonly hooked = new WeakSet<EditorView>();
  /** What each editor shows, so that a republished identical list changes nothing. */
  private painted = new WeakMap<EditorView, string>();
  protected readonly stale = new Set<string>();

  constructor(protected readonly host: BindingHost) {}

  protected diagnosticsOf(uri: string) {
    return this.client?.diagnosticsOf(uri) ?? [];
  }

  protected paintView(view: EditorView, uri: string): void {
    this.hookHover(view, uri);
    const diagnostics = this.diagnosticsOf(uri);
    const key = JSON.stringify(diagnostics);
    if (this.painted.get(view) === key) {
      return;
    }
    this.painted.set(view, key);
    paint(view, uri, diagnostics, fix => {
      this.applyFix(fix);
    });
  }

  protected forgetPainted(): void {
    this.painted = new WeakMap();
  }

  abstract applyFix(fix: Fix): void;

  private hookHover(view: EditorView, uri: string): void {
    if (this.hooked.has(view)) {
      return;
    }
    this.hooked.add(view);
    const rendermime = this.host.rendermime;
    const tooltip = hoverTooltip(async (v, pos) => {
      const client = this.client;
      if (!client) {
        return null;
      }
      const line = v.state.doc.lineAt(pos);
      const text = await client.hover(uri, line.number - 1, pos - line.from).catch(() => null);
      if (!text) {
        return null;
      }
      return {
        pos,
        create: () => {
          const dom = v.dom.ownerDocument.createElement('div');
          dom.className = 'jp-torchdoctor-hover';
          if (rendermime) {
            const renderer = rendermime.createRenderer('text/markdown');
            renderer.addClass('jp-torchdoctor-hover-markdown');
            dom.append(renderer.node);
            void renderer.renderModel(
              rendermime.createModel({ data: { 'text/markdown': text }, trusted: false })
            );
          } else {
            dom.classList.add('jp-torchdoctor-hover-text');
            dom.textContent = text;
          }
          return { dom };
        }
      };
    });
    view.dispatch({ effects: StateEffect.appendConfig.of(tooltip) });
  }
}

/** The notebook's kernel connection as the live section's probes use it. */
export function probeKernel(kernel: Kernel.IKernelConnection): ProbeKernel {
  return {
    id: kernel.id,
    get supportsSubshells() {
      return kernel.supportsSubshells;
    },
    ready: async () => {
      await kernel.info;
    },
    execute: async (expressions, subshellId) => {
      const msg = KernelMessage.createMessage({
        msgType: 'execute_request',
        channel: 'shell',
        username: kernel.username,
        session: kernel.clientId,
        subshellId,
        content: {
          code: '',
          silent: true,
          store_history: false,
          allow_stdin: false,
          stop_on_error: false,
          user_expressions: expressions
        }
      });
      const reply = await kernel.sendShellMessage(msg, true, true).done;
      return reply.content as ExecuteReplyContent;
    },
    createSubshell: async () => {
      const reply = await kernel.requestCreateSubshell({}, true).done;
      const id = (reply.content as { subshell_id?: unknown }).subshell_id;
      return typeof id === 'string' ? id : null;
    },
    deleteSubshell: id => {
      if (!kernel.isDisposed) {
        kernel.requestDeleteSubshell({ subshell_id: id }, true).done.catch(() => undefined);
      }
    }
  };
}

export interface LiveHooks {
  helper: () => Promise<ProbeHelper>;
  enabled: () => boolean;
}

export class NotebookBinding extends EditorBinding implements Binding {
  readonly kind = 'notebook';
  readonly sync: NotebookSync;
  readonly live: LiveController;
  private timer: number | undefined;
  private restarting = false;
  /** The kernel's id the server was last told of (undefined: none yet, null: no kernel). */
  private kernelId: string | null | undefined = undefined;

  private readonly notebookPath: string;

  constructor(
    readonly panel: NotebookPanel,
    private readonly notebookUri: string,
    host: BindingHost,
    liveHooks: LiveHooks
  ) {
    super(host);
    const path = decodeURIComponent(new URL(notebookUri).pathname);
    this.notebookPath = path;
    this.sync = new NotebookSync(notebookUri, path, (method, params) => {
      this.client?.endpoint.notify(method, params);
    });
    const model = panel.content.model;
    if (model) {
      model.contentChanged.connect(this.schedule);
      model.cells.changed.connect(this.schedule);
    }
    this.live = new LiveController({
      helper: liveHooks.helper,
      enabled: liveHooks.enabled,
      changed: () => {
        this.host.changed(this);
      }
    });
    const session = panel.sessionContext;
    session.kernelChanged.connect(this.kernelChanged);
    session.statusChanged.connect(this.statusChanged);
    session.iopubMessage.connect(this.iopub);
    this.kernelChanged();
  }

  get name(): string {
    return this.panel.context.path;
  }

  private readonly kernelChanged = (): void => {
    const kernel = this.panel.sessionContext.session?.kernel ?? null;
    this.live.setKernel(kernel ? probeKernel(kernel) : null);
    const id = kernel?.id ?? null;
    if (this.kernelId !== undefined && id !== this.kernelId) {
      this.kernelStatus(id === null ? 'none' : 'changed');
    }
    this.kernelId = id;
  };

  private readonly statusChanged = (_: unknown, status: Kernel.Status): void => {
    if (status === 'restarting' || status === 'autorestarting' || status === 'starting') {
      if (!this.restarting) {
        this.kernelStatus('restarting');
      }
      this.restarting = true;
      this.live.restarted();
    } else if (status === 'idle' && this.restarting) {
      this.restarting = false;
      this.kernelStatus('ready');
      this.live.refresh();
    } else if (status === 'dead') {
      this.kernelStatus('dead');
      this.live.setKernel(null);
    }
  };

  /** Tells the language server what became of the notebook's kernel: its live findings
   * (read from the kernel's namespace) follow a restart, a shutdown, another kernel. */
  private kernelStatus(status: 'restarting' | 'ready' | 'dead' | 'none' | 'changed'): void {
    if (this.client && this.sync.isOpen) {
      this.client.endpoint.notify('torchdoctor/kernelStatus', {
        notebook: { uri: this.sync.notebookUri },
        status
      });
    }
  }

  private readonly iopub = (_: unknown, msg: KernelMessage.IMessage): void => {
    this.live.iopub(msg as unknown as IopubMessage);
  };

  liveState(): LiveState {
    return this.live.state;
  }

  private snapshot(): CellSnapshot[] {
    const model = this.panel.content.model;
    const out: CellSnapshot[] = [];
    if (!model) {
      return out;
    }
    for (let i = 0; i < model.cells.length; i++) {
      const cell = model.cells.get(i);
      if (cell.type === 'code') {
        out.push({ id: cell.id, text: cell.sharedModel.getSource() });
      }
    }
    return out;
  }

  attach(client: LanguageClient | null): void {
    this.client = client;
    this.stale.clear();
    this.forgetPainted();
    if (client) {
      this.sync.open(this.snapshot());
    }
    this.paintAll();
  }

  private readonly schedule = (): void => {
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => {
      if (!this.client) {
        return; // sent as a whole when the connection is back
      }
      const before = new Map(this.cells().map(c => [c.uri, this.sync.textOf(c.uri)]));
      this.sync.update(this.snapshot());
      for (const cell of this.cells()) {
        if (before.get(cell.uri) !== this.sync.textOf(cell.uri)) {
          this.stale.add(cell.uri);
        }
      }
      this.paintAll(); // new cells; unchanged ones are skipped
    }, SYNC_DELAY_MS);
  };

  /** The notebook's code cells with their URIs and their numbers among all cells. */
  cells(): CellRef[] {
    const model = this.panel.content.model;
    const out: CellRef[] = [];
    if (!model) {
      return out;
    }
    for (let i = 0; i < model.cells.length; i++) {
      const cell = model.cells.get(i);
      if (cell.type === 'code') {
        out.push({ id: cell.id, uri: this.sync.uriOf(cell.id), index: i });
      }
    }
    return out;
  }

  owns(uri: string): boolean {
    return this.sync.cellIdOf(uri) !== undefined;
  }

  published(uri: string): void {
    this.stale.delete(uri);
    const id = this.sync.cellIdOf(uri);
    if (id !== undefined) {
      this.paintCell(id);
    }
  }

  private widgetOf(cellId: string) {
    return this.panel.content.widgets.find(w => w.model.id === cellId);
  }

  private viewOf(cellId: string): EditorView | null {
    const editor = this.widgetOf(cellId)?.editor;
    return editor instanceof CodeMirrorEditor ? editor.editor : null;
  }

  paintAll(): void {
    for (const cell of this.cells()) {
      this.paintCell(cell.id);
    }
  }

  private paintCell(cellId: string): void {
    const widget = this.widgetOf(cellId);
    if (!widget) {
      return;
    }
    const view = this.viewOf(cellId);
    if (!view) {
      void widget.ready.then(() => {
        if (this.viewOf(cellId)) {
          this.paintCell(cellId);
        }
      });
      return;
    }
    this.paintView(view, this.sync.uriOf(cellId));
  }

  canApply(edits: Map<string, TextEdit[]>): boolean {
    return [...edits.keys()].every(uri => !this.stale.has(uri) && this.owns(uri));
  }

  /** Apply edits by cell URI (all cells or none); false when a cell changed since the server
   * saw it. With JupyterLab's document-wide undo (the notebook setting "Enable undo/redo
   * actions at the notebook document level"), edits of several cells are made in one
   * transaction of the notebook's shared model: one undo step, whichever cell Ctrl+Z is
   * pressed in. Otherwise each cell has its own undo history, and each cell's edits are one
   * undo step of that cell. */
  applyEdits(edits: Map<string, TextEdit[]>): boolean {
    if (!this.canApply(edits)) {
      return false;
    }
    const notebook = this.panel.content.model?.sharedModel;
    if (edits.size > 1 && notebook && !notebook.disableDocumentWideUndoRedo) {
      notebook.transact(() => {
        for (const [uri, list] of edits) {
          const id = this.sync.cellIdOf(uri);
          const shared = notebook.cells.find(cell => cell.id === id);
          if (id !== undefined && shared) {
            applyToShared(shared, list);
          }
        }
      });
      return true;
    }
    for (const [uri, list] of edits) {
      const id = this.sync.cellIdOf(uri);
      if (id === undefined) {
        continue;
      }
      const view = this.viewOf(id);
      if (view) {
        applyToView(view, list);
        continue;
      }
      const shared = this.widgetOf(id)?.model.sharedModel;
      if (shared) {
        applyToShared(shared, list);
      }
    }
    return true;
  }

  /** "Measure this cell" (the user's click): runs the active code cell in the kernel under
   * `%%torchdoctor run`, its output under the cell, then has the server read the reports again.
   * False when there is no code cell or no kernel. */
  async measureActiveCell(): Promise<boolean> {
    const cell = this.panel.content.activeCell;
    if (!(cell instanceof CodeCell) || !this.panel.sessionContext.session?.kernel) {
      return false;
    }
    const code = measureCode(cell.model.sharedModel.getSource(), this.notebookPath);
    try {
      const reply = await OutputArea.execute(code, cell.outputArea, this.panel.sessionContext);
      const count = reply?.content && 'execution_count' in reply.content ? reply.content.execution_count : null;
      if (typeof count === 'number') {
        cell.model.executionCount = count; // the cell ran: its prompt says when
      }
    } finally {
      this.client?.endpoint.notify('workspace/didChangeWatchedFiles', {
        changes: [{ uri: reportsUri(this.notebookUri), type: 2 }]
      });
    }
    return true;
  }

  applyFix(fix: Fix): void {
    this.applyEdits(fix.edits);
  }

  jump(finding: Finding): void {
    const content = this.panel.content;
    const index = content.widgets.findIndex(w => w.model.id === finding.cell.id);
    if (index < 0) {
      return;
    }
    content.activeCellIndex = index;
    content.mode = 'edit';
    const widget = content.widgets[index];
    void content.scrollToItem(index).then(() => {
      const editor = widget?.editor;
      if (editor) {
        const { line, character } = finding.diagnostic.range.start;
        editor.setCursorPosition({ line, column: character });
        editor.focus();
      }
    });
  }

  dispose(): void {
    window.clearTimeout(this.timer);
    const model = this.panel.content.model;
    if (model) {
      model.contentChanged.disconnect(this.schedule);
      model.cells.changed.disconnect(this.schedule);
    }
    const session = this.panel.sessionContext;
    session.kernelChanged.disconnect(this.kernelChanged);
    session.statusChanged.disconnect(this.statusChanged);
    session.iopubMessage.disconnect(this.iopub);
    this.live.dispose();
    const uris = this.cells().map(c => c.uri);
    if (this.client) {
      this.sync.close();
      this.client.forget(uris);
    }
    this.client = null;
  }
}

/** A Python file in JupyterLab's file editor. */
export class FileBinding extends EditorBinding implements Binding {
  readonly kind = 'file';
  readonly live = null;
  readonly sync: TextDocumentSync;
  private timer: number | undefined;

  constructor(
    readonly widget: IDocumentWidget<FileEditor>,
    readonly uri: string,
    host: BindingHost
  ) {
    super(host);
    this.sync = new TextDocumentSync(uri, (method, params) => {
      this.client?.endpoint.notify(method, params);
    });
    widget.content.model.sharedModel.changed.connect(this.schedule);
  }

  get name(): string {
    return this.widget.context.path.split('/').pop() ?? this.widget.context.path;
  }

  private text(): string {
    return this.widget.content.model.sharedModel.getSource();
  }

  private view(): EditorView | null {
    const editor = this.widget.content.editor;
    return editor instanceof CodeMirrorEditor ? editor.editor : null;
  }

  attach(client: LanguageClient | null): void {
    this.client = client;
    this.stale.clear();
    this.forgetPainted();
    if (client) {
      this.sync.open(this.text());
    }
    this.paint();
  }

  private readonly schedule = (): void => {
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => {
      if (this.client && this.sync.update(this.text())) {
        this.stale.add(this.uri);
      }
    }, SYNC_DELAY_MS);
  };

  private paint(): void {
    const view = this.view();
    if (view) {
      this.paintView(view, this.uri);
    }
  }

  cells(): CellRef[] {
    return [{ id: 'file', uri: this.uri, index: 0 }];
  }

  owns(uri: string): boolean {
    return uri === this.uri;
  }

  published(uri: string): void {
    if (uri === this.uri) {
      this.stale.delete(uri);
      this.paint();
    }
  }

  canApply(edits: Map<string, TextEdit[]>): boolean {
    return [...edits.keys()].every(uri => uri === this.uri) && !this.stale.has(this.uri);
  }

  applyEdits(edits: Map<string, TextEdit[]>): boolean {
    if (!this.canApply(edits)) {
      return false;
    }
    const list = edits.get(this.uri) ?? [];
    const view = this.view();
    if (view) {
      applyToView(view, list);
    } else {
      applyToShared(this.widget.content.model.sharedModel, list);
    }
    return true;
  }

  applyFix(fix: Fix): void {
    this.applyEdits(fix.edits);
  }

  jump(finding: Finding): void {
    const editor = this.widget.content.editor;
    const { line, character } = finding.diagnostic.range.start;
    editor.setCursorPosition({ line, column: character });
    editor.revealPosition({ line, column: character });
    editor.focus();
  }

  dispose(): void {
    window.clearTimeout(this.timer);
    this.widget.content.model.sharedModel.changed.disconnect(this.schedule);
    if (this.client) {
      this.sync.close();
      this.client.forget([this.uri]);
    }
    this.client = null;
  }
}
