/**
 * The language server connection: a websocket to the server extension's relay, the LSP
 * handshake (notebook sync, push diagnostics, resolvable code actions), the diagnostics the
 * server publishes, and the requests the server makes of the client.
 */

import { JsonRpcEndpoint, Transport } from './jsonrpc';
import {
  CodeAction,
  Diagnostic,
  FIX_ALL_KIND,
  PublishDiagnosticsParams,
  WorkspaceEdit
} from './lsp';

export const CLIENT_NAME = 'jupyterlab-torchdoctor';

/** The editor's settings as torchdoctor's server reads them (`initializationOptions`). */
export interface ServerSettings {
  enable: boolean;
  unsafeFixes: boolean;
  select: string[];
  ignore: string[];
  bridge: boolean;
}

export const DEFAULT_SETTINGS: ServerSettings = {
  enable: true,
  unsafeFixes: false,
  select: [],
  ignore: [],
  bridge: true
};

/** What the server reads: keys left empty stay at the project's `[tool.torchdoctor]`. */
export function serverSettings(settings: ServerSettings): Record<string, unknown> {
  const out: Record<string, unknown> = { enable: settings.enable, bridge: settings.bridge };
  if (settings.unsafeFixes) {
    out.unsafeFixes = true;
  }
  if (settings.select.length > 0) {
    out.select = settings.select;
  }
  if (settings.ignore.length > 0) {
    out.ignore = settings.ignore;
  }
  return out;
}

export function initializeParams(
  rootUri: string,
  locale: string,
  settings: ServerSettings,
  version: string
): Record<string, unknown> {
  return {
    processId: null,
    clientInfo: { name: CLIENT_NAME, version },
    locale,
    rootUri,
    workspaceFolders: [{ uri: rootUri, name: 'jupyter' }],
    initializationOptions: serverSettings(settings),
    capabilities: {
      general: { positionEncodings: ['utf-16'] },
      textDocument: {
        synchronization: { dynamicRegistration: false, didSave: false },
        publishDiagnostics: {
          relatedInformation: true,
          codeDescriptionSupport: true,
          dataSupport: true,
          versionSupport: true
        },
        codeAction: {
          dynamicRegistration: false,
          dataSupport: true,
          resolveSupport: { properties: ['edit'] },
          codeActionLiteralSupport: {
            codeActionKind: { valueSet: ['quickfix', 'source', 'source.fixAll'] }
          }
        },
        hover: { contentFormat: ['markdown', 'plaintext'] }
      },
      workspace: {
        configuration: true,
        applyEdit: true,
        workspaceEdit: { documentChanges: false },
        didChangeConfiguration: { dynamicRegistration: false }
      },
      notebookDocument: {
        synchronization: { dynamicRegistration: false, executionSummarySupport: false }
      },
      window: { workDoneProgress: false }
    }
  };
}

export interface ClientEvents {
  diagnostics(uri: string): void;
  applyEdit(edit: WorkspaceEdit): boolean;
  log(message: string): void;
  closed(): void;
}

export class LanguageClient {
  readonly endpoint: JsonRpcEndpoint;
  private readonly diagnostics = new Map<string, Diagnostic[]>();
  private settings: ServerSettings;
  private ready: Promise<void> | null = null;

  constructor(
    transport: Transport,
    private readonly events: ClientEvents,
    settings: ServerSettings = DEFAULT_SETTINGS
  ) {
    this.settings = settings;
    this.endpoint = new JsonRpcEndpoint(transport);
    this.endpoint.onNotification('textDocument/publishDiagnostics', params => {
      const p = params as PublishDiagnosticsParams;
      this.diagnostics.set(p.uri, p.diagnostics);
      this.events.diagnostics(p.uri);
    });
    this.endpoint.onNotification('window/logMessage', params => {
      this.events.log((params as { message: string }).message);
    });
    this.endpoint.onNotification('window/showMessage', params => {
      this.events.log((params as { message: string }).message);
    });
    this.endpoint.onRequest('workspace/configuration', params => {
      const items = (params as { items?: unknown[] }).items ?? [];
      return items.map(() => serverSettings(this.settings));
    });
    this.endpoint.onRequest('client/registerCapability', () => null);
    this.endpoint.onRequest('client/unregisterCapability', () => null);
    this.endpoint.onRequest('window/workDoneProgress/create', () => null);
    this.endpoint.onRequest('workspace/diagnostic/refresh', () => null);
    this.endpoint.onRequest('window/showMessageRequest', () => null);
    this.endpoint.onRequest('workspace/applyEdit', params => {
      const applied = this.events.applyEdit((params as { edit: WorkspaceEdit }).edit);
      return { applied };
    });
  }

  /** The LSP handshake; later calls return the same promise. */
  start(rootUri: string, locale: string, version: string): Promise<void> {
    this.ready ??= this.endpoint
      .request('initialize', initializeParams(rootUri, locale, this.settings, version))
      .then(() => {
        this.endpoint.notify('initialized', {});
      });
    return this.ready;
  }

  diagnosticsOf(uri: string): Diagnostic[] {
    return this.diagnostics.get(uri) ?? [];
  }

  forget(uris: Iterable<string>): void {
    for (const uri of uris) {
      this.diagnostics.delete(uri);
    }
  }

  updateSettings(settings: ServerSettings): void {
    this.settings = settings;
    this.endpoint.notify('workspace/didChangeConfiguration', {
      settings: { torchdoctor: serverSettings(settings) }
    });
  }

  /** The edit of the notebook's "fix all" (safe fixes, or unsafe too where settings say so). */
  async fixAll(cellUri: string): Promise<WorkspaceEdit | undefined> {
    const actions = await this.endpoint.request<CodeAction[] | null>('textDocument/codeAction', {
      textDocument: { uri: cellUri },
      range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
      context: { diagnostics: [], only: [FIX_ALL_KIND] }
    });
    const action = (actions ?? []).find(a => a.kind === FIX_ALL_KIND);
    if (!action) {
      return undefined;
    }
    if (action.edit) {
      return action.edit;
    }
    const resolved = await this.endpoint.request<CodeAction>('codeAction/resolve', action);
    return resolved.edit;
  }

  async hover(uri: string, line: number, character: number): Promise<string | null> {
    const result = await this.endpoint.request<{
      contents: { kind: string; value: string } | string;
    } | null>('textDocument/hover', { textDocument: { uri }, position: { line, character } });
    if (!result) {
      return null;
    }
    return typeof result.contents === 'string' ? result.contents : result.contents.value;
  }

  async stop(): Promise<void> {
    if (this.endpoint.isClosed) {
      return;
    }
    try {
      await this.endpoint.request('shutdown');
      this.endpoint.notify('exit');
    } finally {
      this.endpoint.dispose();
    }
  }
}

/** A transport over a browser WebSocket; `receive` is called with each text message. */
export function websocketTransport(
  socket: WebSocket,
  receive: (message: string) => void,
  closed: () => void
): { transport: Transport; opened: Promise<void> } {
  const queue: string[] = [];
  const opened = new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => {
      for (const message of queue.splice(0)) {
        socket.send(message);
      }
      resolve();
    });
    socket.addEventListener('error', () => {
      reject(new Error('torchdoctor: cannot reach the language server relay'));
    });
  });
  socket.addEventListener('message', event => {
    if (typeof event.data === 'string') {
      receive(event.data);
    }
  });
  socket.addEventListener('close', () => {
    closed();
  });
  return {
    opened,
    transport: {
      send: message => {
        if (socket.readyState === WebSocket.OPEN) {
          socket.send(message);
        } else if (socket.readyState === WebSocket.CONNECTING) {
          queue.push(message);
        }
      },
      close: () => {
        socket.close();
      }
    }
  };
}

export const RECONNECT_MAX_MS = 15_000;

/** How long to wait before reconnecting attempt `attempt` (0-based) after the connection
 * dropped: 0.5 s, 1 s, 2 s, ... up to 15 s. */
export function reconnectDelay(attempt: number): number {
  return Math.min(RECONNECT_MAX_MS, 500 * 2 ** Math.max(0, attempt));
}
