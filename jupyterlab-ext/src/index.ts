/**
 * The JupyterLab plugin: one connection to `torchdoctor server` (through the server
 * extension's websocket relay) for the page, each open notebook synced cell by cell, findings
 * underlined in the cells with fix buttons in their tooltip, live-fact hovers, and the panel.
 */

import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { CodeMirrorEditor } from '@jupyterlab/codemirror';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ITranslator } from '@jupyterlab/translation';
import { bugIcon } from '@jupyterlab/ui-components';
import { hoverTooltip, EditorView } from '@codemirror/view';
import { StateEffect } from '@codemirror/state';

import { DEFAULT_SETTINGS, LanguageClient, ServerSettings, websocketTransport } from './client';
import { applyToView, paint } from './editor';
import { CellRef, Finding, findingsByCell } from './findings';
import { editsByUri, Fix, TextEdit, toChanges, WorkspaceEdit } from './lsp';
import { CellSnapshot, NotebookSync } from './notebookSync';
import { CHINESE, ENGLISH, FindingsPanel } from './panel';

const PLUGIN_ID = 'jupyterlab-torchdoctor:plugin';
const VERSION = '0.1.0';
const SYNC_DELAY_MS = 60;

interface ServerInfo {
  version: string;
  rootUri: string;
}

function settingsFrom(raw: ISettingRegistry.ISettings | null): ServerSettings {
  if (!raw) {
    return DEFAULT_SETTINGS;
  }
  const c = raw.composite as Partial<ServerSettings>;
  return {
    enable: c.enable ?? true,
    unsafeFixes: c.unsafeFixes ?? false,
    select: c.select ?? [],
    ignore: c.ignore ?? [],
    bridge: c.bridge ?? true
  };
}

/** One notebook as the language server sees it. */
class NotebookBinding {
  readonly sync: NotebookSync;
  private timer: number | undefined;
  private readonly stale = new Set<string>();
  private readonly hooked = new WeakSet<EditorView>();
  /** What each editor shows, so that a republished identical list changes nothing. */
  private readonly painted = new WeakMap<EditorView, string>();

  constructor(
    readonly panel: NotebookPanel,
    notebookUri: string,
    private readonly client: LanguageClient,
    private readonly changed: () => void,
    private readonly rendermime: IRenderMimeRegistry | null
  ) {
    const path = decodeURIComponent(new URL(notebookUri).pathname);
    this.sync = new NotebookSync(notebookUri, path, (method, params) => {
      this.client.endpoint.notify(method, params);
    });
    const model = panel.content.model;
    if (model) {
      model.contentChanged.connect(this.schedule);
      model.cells.changed.connect(this.schedule);
    }
    this.sync.open(this.snapshot());
    this.paintAll();
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

  private readonly schedule = (): void => {
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => {
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

  /** The notebook's cells (all kinds, for their numbers) with the URIs of code cells. */
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
    const uri = this.sync.uriOf(cellId);
    this.hookHover(view, uri);
    const diagnostics = this.client.diagnosticsOf(uri);
    const key = JSON.stringify(diagnostics);
    if (this.painted.get(view) === key) {
      return;
    }
    this.painted.set(view, key);
    paint(view, uri, diagnostics, fix => {
      this.applyFix(fix);
    });
  }

  private hookHover(view: EditorView, uri: string): void {
    if (this.hooked.has(view)) {
      return;
    }
    this.hooked.add(view);
    const client = this.client;
    const rendermime = this.rendermime;
    const tooltip = hoverTooltip(async (v, pos) => {
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

  /** Apply edits by cell URI; false when a cell changed since the server saw it. */
  applyEdits(edits: Map<string, TextEdit[]>): boolean {
    for (const uri of edits.keys()) {
      if (this.stale.has(uri) || !this.owns(uri)) {
        return false;
      }
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
        const text = shared.getSource();
        shared.transact(() => {
          for (const change of toChanges(text, list)) {
            shared.updateSource(change.from, change.to, change.insert);
          }
        });
      }
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
    const uris = this.cells().map(c => c.uri);
    this.sync.close();
    this.client.forget(uris);
    this.changed();
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'torchdoctor: PyTorch pitfalls in notebook cells, with fixes and a findings panel.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabShell, ISettingRegistry, ITranslator, IRenderMimeRegistry],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    labShell: ILabShell | null,
    registry: ISettingRegistry | null,
    translator: ITranslator | null,
    rendermime: IRenderMimeRegistry | null
  ) => {
    const locale = translator?.languageCode ?? 'en';
    const zh = locale.toLowerCase().startsWith('zh');
    const text = zh ? CHINESE : ENGLISH;
    const bindings = new Map<NotebookPanel, NotebookBinding>();
    let settings = DEFAULT_SETTINGS;
    let client: Promise<LanguageClient> | null = null;

    const panel = new FindingsPanel(
      {
        jump: finding => {
          current()?.jump(finding);
        },
        fix: (_finding, fix) => {
          current()?.applyFix(fix);
        },
        fixAll: () => {
          void fixAll();
        }
      },
      text
    );
    panel.title.icon = bugIcon;
    if (labShell) {
      labShell.add(panel, 'right', { rank: 600 });
    }

    function current(): NotebookBinding | undefined {
      const widget = tracker.currentWidget;
      return widget ? bindings.get(widget) : undefined;
    }

    function refreshPanel(): void {
      const binding = current();
      panel.setFindings(
        binding ? findingsByCell(binding.cells(), uri => connected?.diagnosticsOf(uri) ?? []) : null
      );
    }

    let connected: LanguageClient | null = null;
    let rootUri = '';
    function connect(): Promise<LanguageClient> {
      client ??= (async () => {
        const serverSettings = ServerConnection.makeSettings();
        const response = await ServerConnection.makeRequest(
          URLExt.join(serverSettings.baseUrl, 'torchdoctor', 'info'),
          {},
          serverSettings
        );
        if (!response.ok) {
          throw new Error(`torchdoctor: the server extension is not enabled (${response.status})`);
        }
        const info = (await response.json()) as ServerInfo;
        rootUri = info.rootUri;
        let url = URLExt.join(serverSettings.wsUrl, 'torchdoctor', 'lsp');
        const token = PageConfig.getToken();
        if (token && serverSettings.appendToken) {
          url += `?token=${encodeURIComponent(token)}`;
        }
        const socket = new serverSettings.WebSocket(url);
        let lsp: LanguageClient | null = null;
        const { transport, opened } = websocketTransport(
          socket,
          message => {
            void lsp?.endpoint.receive(message);
          },
          () => {
            lsp?.endpoint.dispose();
            client = null;
            connected = null;
            panel.setProblem(text.disconnected);
          }
        );
        lsp = new LanguageClient(
          transport,
          {
            diagnostics: uri => {
              for (const binding of bindings.values()) {
                if (binding.owns(uri)) {
                  binding.published(uri);
                }
              }
              refreshPanel();
            },
            applyEdit: edit => applyWorkspaceEdit(edit),
            log: message => {
              console.debug(`torchdoctor: ${message}`);
            },
            closed: () => undefined
          },
          settings
        );
        await opened;
        await lsp.start(info.rootUri, locale, VERSION);
        connected = lsp;
        panel.setProblem(null);
        return lsp;
      })().catch((err: unknown) => {
        client = null; // the next notebook tries again
        throw err;
      });
      return client;
    }

    function applyWorkspaceEdit(edit: WorkspaceEdit): boolean {
      const edits = editsByUri(edit);
      for (const binding of bindings.values()) {
        const mine = new Map([...edits].filter(([uri]) => binding.owns(uri)));
        if (mine.size > 0 && !binding.applyEdits(mine)) {
          return false;
        }
      }
      return true;
    }

    async function fixAll(): Promise<void> {
      const binding = current();
      const lsp = connected;
      const first = binding?.cells()[0];
      if (!binding || !lsp || !first) {
        return;
      }
      const edit = await lsp.fixAll(first.uri);
      if (edit) {
        binding.applyEdits(editsByUri(edit));
      }
    }

    async function bind(widget: NotebookPanel): Promise<void> {
      await widget.context.ready;
      const lsp = await connect();
      const path = widget.context.path.split('/').map(encodeURIComponent).join('/');
      const uri = `${rootUri.replace(/\/$/, '')}/${path}`;
      const binding = new NotebookBinding(widget, uri, lsp, refreshPanel, rendermime);
      bindings.set(widget, binding);
      widget.disposed.connect(() => {
        bindings.delete(widget);
        binding.dispose();
        refreshPanel();
      });
      refreshPanel();
    }

    tracker.widgetAdded.connect((_, widget) => {
      bind(widget).catch((err: unknown) => {
        panel.setProblem(`${text.disconnected} (${err instanceof Error ? err.message : String(err)})`);
        console.warn('torchdoctor:', err);
      });
    });
    tracker.currentChanged.connect(refreshPanel);

    if (registry) {
      void registry.load(PLUGIN_ID).then(loaded => {
        settings = settingsFrom(loaded);
        loaded.changed.connect(() => {
          settings = settingsFrom(loaded);
          connected?.updateSettings(settings);
        });
        connected?.updateSettings(settings);
      }).catch(() => undefined);
    }
    app.restored.then(refreshPanel).catch(() => undefined);
  }
};

export default plugin;
