/**
 * The JupyterLab plugin: one connection to `torchdoctor server` (through the server
 * extension's websocket relay) for the page, reconnected when it drops; each open notebook
 * synced cell by cell and each Python file of the file editor synced as a text document;
 * findings underlined with fix buttons in their tooltip, hovers, and the side panel with the
 * current document's findings and, for a notebook, its live tensors.
 */

import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { IDocumentWidget } from '@jupyterlab/docregistry';
import { FileEditor, IEditorTracker } from '@jupyterlab/fileeditor';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ITranslator } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { Binding, FileBinding, NotebookBinding } from './bindings';
import {
  DEFAULT_SETTINGS,
  LanguageClient,
  reconnectDelay,
  ServerSettings,
  websocketTransport
} from './client';
import { findingsByCell } from './findings';
import { torchdoctorIcon } from './icon';
import { ProbeHelper } from './live';
import { editsByUri, splitByOwner, WorkspaceEdit } from './lsp';
import { FindingsPanel, panelText } from './panel';

const PLUGIN_ID = 'jupyterlab-torchdoctor:plugin';
const VERSION = '0.1.0';
/** How long the panel waits for more diagnostics before it is rebuilt (ms). */
const PANEL_REFRESH_MS = 30;

interface ServerInfo {
  version: string;
  rootUri: string;
}

export interface Settings extends ServerSettings {
  /** Check Python files opened in the file editor too. */
  files: boolean;
}

function settingsFrom(raw: ISettingRegistry.ISettings | null): Settings {
  const c = (raw?.composite ?? {}) as Partial<Settings>;
  return {
    enable: c.enable ?? DEFAULT_SETTINGS.enable,
    unsafeFixes: c.unsafeFixes ?? DEFAULT_SETTINGS.unsafeFixes,
    select: c.select ?? DEFAULT_SETTINGS.select,
    ignore: c.ignore ?? DEFAULT_SETTINGS.ignore,
    bridge: c.bridge ?? DEFAULT_SETTINGS.bridge,
    files: c.files ?? true
  };
}

async function getJson<T>(...path: string[]): Promise<T> {
  const serverSettings = ServerConnection.makeSettings();
  const response = await ServerConnection.makeRequest(
    URLExt.join(serverSettings.baseUrl, ...path),
    {},
    serverSettings
  );
  if (!response.ok) {
    throw new Error(`torchdoctor: the server extension is not enabled (${response.status})`);
  }
  return (await response.json()) as T;
}

function isPythonFile(path: string): boolean {
  return /\.pyi?$/i.test(path);
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    'torchdoctor: PyTorch pitfalls in notebook cells and Python files, with fixes, a findings panel and live tensors.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabShell, ISettingRegistry, ITranslator, IRenderMimeRegistry, IEditorTracker],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    labShell: ILabShell | null,
    registry: ISettingRegistry | null,
    translator: ITranslator | null,
    rendermime: IRenderMimeRegistry | null,
    editors: IEditorTracker | null
  ) => {
    const locale = translator?.languageCode ?? 'en';
    const text = panelText(locale);
    const bindings = new Map<Widget, Binding>();
    let settings: Settings = settingsFrom(null);
    let settingsLoaded: Promise<void> = Promise.resolve();

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
        },
        refreshLive: () => {
          current()?.live?.refresh();
        },
        measureCell: () => {
          const binding = current();
          if (binding instanceof NotebookBinding) {
            binding.measureActiveCell().catch((error: unknown) => {
              console.warn('torchdoctor: could not measure the cell', error);
            });
          }
        }
      },
      text
    );
    panel.title.icon = torchdoctorIcon;
    if (labShell) {
      labShell.add(panel, 'right', { rank: 600 });
    }

    /** The document the panel is about: the main area's current widget when it is ours. */
    function current(): Binding | undefined {
      const widget = labShell?.currentWidget ?? tracker.currentWidget;
      return widget ? bindings.get(widget) : undefined;
    }

    function refreshPanel(): void {
      const binding = current();
      if (!binding) {
        panel.setFindings(null);
        panel.setLive(null);
        return;
      }
      panel.setFindings(
        findingsByCell(binding.cells(), uri => connected?.diagnosticsOf(uri) ?? []),
        binding.kind,
        binding.name
      );
      panel.setLive(binding.live?.state ?? null);
    }

    /** The panel rebuilt once for a burst of publishes (one per cell whose findings changed),
     * not once per cell: in a notebook of hundreds of cells, that was quadratic. */
    let panelTimer: number | undefined;
    function refreshPanelSoon(): void {
      if (panelTimer === undefined) {
        panelTimer = window.setTimeout(() => {
          panelTimer = undefined;
          refreshPanel();
        }, PANEL_REFRESH_MS);
      }
    }

    // ---- the connection --------------------------------------------------------------------
    let connected: LanguageClient | null = null;
    let connecting: Promise<LanguageClient> | null = null;
    let rootUri = '';
    let attempts = 0;
    let retryTimer: number | undefined;
    let helper: Promise<ProbeHelper> | null = null;

    const probeHelper = (): Promise<ProbeHelper> => {
      helper ??= getJson<ProbeHelper>('torchdoctor', 'probe').catch((err: unknown) => {
        helper = null;
        throw err;
      });
      return helper;
    };

    function dropped(): void {
      connected = null;
      connecting = null;
      for (const binding of bindings.values()) {
        binding.attach(null);
      }
      refreshPanel();
      if (bindings.size > 0) {
        panel.setProblem(text.reconnecting);
        window.clearTimeout(retryTimer);
        retryTimer = window.setTimeout(() => {
          void connect().catch(() => undefined);
        }, reconnectDelay(attempts++));
      } else {
        panel.setProblem(null);
      }
    }

    function connect(): Promise<LanguageClient> {
      connecting ??= (async () => {
        await settingsLoaded;
        const info = await getJson<ServerInfo>('torchdoctor', 'info');
        rootUri = info.rootUri;
        const serverSettings = ServerConnection.makeSettings();
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
            if (connected !== null && connected === lsp) {
              dropped();
            }
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
              refreshPanelSoon();
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
        if (lsp.endpoint.isClosed) {
          throw new Error('torchdoctor: the language server closed the connection');
        }
        connected = lsp;
        attempts = 0;
        panel.setProblem(null);
        for (const binding of bindings.values()) {
          binding.attach(lsp);
        }
        refreshPanel();
        return lsp;
      })().catch((err: unknown) => {
        connecting = null;
        if (!connected) {
          dropped();
        }
        throw err;
      });
      return connecting;
    }

    function applyWorkspaceEdit(edit: WorkspaceEdit): boolean {
      const split = splitByOwner(editsByUri(edit), bindings.values(), (b, uri) => b.owns(uri));
      if (split === null || [...split].some(([binding, edits]) => !binding.canApply(edits))) {
        return false;
      }
      for (const [binding, edits] of split) {
        binding.applyEdits(edits);
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
        applyWorkspaceEdit(edit);
      }
    }

    function uriOf(path: string): string {
      const encoded = path.split('/').map(encodeURIComponent).join('/');
      return `${rootUri.replace(/\/$/, '')}/${encoded}`;
    }

    function track(widget: Widget, binding: Binding): void {
      bindings.set(widget, binding);
      widget.disposed.connect(() => {
        bindings.delete(widget);
        binding.dispose();
        refreshPanel();
      });
      if (connected) {
        binding.attach(connected);
      }
      refreshPanel();
    }

    const host = {
      rendermime,
      changed: (binding: Binding) => {
        if (binding === current()) {
          panel.setLive(binding.live?.state ?? null);
        }
      }
    };
    const liveHooks = {
      helper: probeHelper,
      enabled: () => settings.enable && settings.bridge
    };

    async function bindNotebook(widget: NotebookPanel): Promise<void> {
      await widget.context.ready;
      await connect().catch((err: unknown) => {
        if (!rootUri) {
          throw err; // never connected: the server extension is missing
        }
      }); // else bound anyway, and attached once the connection is back
      if (widget.isDisposed || bindings.has(widget) || !rootUri) {
        return;
      }
      track(widget, new NotebookBinding(widget, uriOf(widget.context.path), host, liveHooks));
    }

    async function bindFile(widget: IDocumentWidget<FileEditor>): Promise<void> {
      await widget.context.ready;
      await settingsLoaded;
      if (!settings.files || !settings.enable || !isPythonFile(widget.context.path)) {
        return;
      }
      await connect().catch((err: unknown) => {
        if (!rootUri) {
          throw err;
        }
      });
      if (widget.isDisposed || bindings.has(widget) || !rootUri) {
        return;
      }
      track(widget, new FileBinding(widget, uriOf(widget.context.path), host));
    }

    const failed = (err: unknown) => {
      panel.setProblem(`${text.disconnected} (${err instanceof Error ? err.message : String(err)})`);
      console.warn('torchdoctor:', err);
    };
    tracker.widgetAdded.connect((_, widget) => {
      bindNotebook(widget).catch(failed);
    });
    editors?.widgetAdded.connect((_, widget) => {
      bindFile(widget).catch(failed);
    });
    tracker.currentChanged.connect(refreshPanel);
    editors?.currentChanged.connect(refreshPanel);
    labShell?.currentChanged.connect(refreshPanel);

    if (registry) {
      settingsLoaded = registry
        .load(PLUGIN_ID)
        .then(loaded => {
          settings = settingsFrom(loaded);
          loaded.changed.connect(() => {
            settings = settingsFrom(loaded);
            connected?.updateSettings(settings);
            for (const binding of bindings.values()) {
              binding.live?.settingsChanged();
            }
          });
          connected?.updateSettings(settings);
        })
        .catch(() => undefined);
    }
    app.restored.then(refreshPanel).catch(() => undefined);
  }
};

export default plugin;
