/**
 * A small JSON-RPC 2.0 endpoint over any message transport (here a websocket whose text
 * messages are whole JSON-RPC messages, relayed by the server extension to the language
 * server's stdio). No JupyterLab imports: unit-tested on its own.
 */

export interface Transport {
  send(message: string): void;
  close(): void;
}

export interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}

export interface RpcMessage {
  jsonrpc: '2.0';
  id?: number | string | null;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: RpcError;
}

export type NotificationHandler = (params: unknown) => void;
export type RequestHandler = (params: unknown) => unknown;

export class ResponseError extends Error {
  constructor(
    readonly code: number,
    message: string
  ) {
    super(message);
  }
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (reason: Error) => void;
  method: string;
}

export const METHOD_NOT_FOUND = -32601;

export class JsonRpcEndpoint {
  private nextId = 1;
  private readonly pending = new Map<number | string, Pending>();
  private readonly notificationHandlers = new Map<string, NotificationHandler>();
  private readonly requestHandlers = new Map<string, RequestHandler>();
  private closed = false;

  constructor(private readonly transport: Transport) {}

  get isClosed(): boolean {
    return this.closed;
  }

  onNotification(method: string, handler: NotificationHandler): void {
    this.notificationHandlers.set(method, handler);
  }

  onRequest(method: string, handler: RequestHandler): void {
    this.requestHandlers.set(method, handler);
  }

  request<T = unknown>(method: string, params?: unknown): Promise<T> {
    if (this.closed) {
      return Promise.reject(new Error(`connection closed (${method})`));
    }
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, {
        resolve: value => {
          resolve(value as T);
        },
        reject,
        method
      });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }

  notify(method: string, params?: unknown): void {
    if (!this.closed) {
      this.send({ jsonrpc: '2.0', method, params });
    }
  }

  /** Feed one message received from the transport. */
  async receive(raw: string): Promise<void> {
    let message: RpcMessage;
    try {
      message = JSON.parse(raw) as RpcMessage;
    } catch {
      return;
    }
    if (message.method !== undefined) {
      if (message.id !== undefined && message.id !== null) {
        await this.answer(message.id, message.method, message.params);
      } else {
        this.notificationHandlers.get(message.method)?.(message.params);
      }
      return;
    }
    if (message.id === undefined || message.id === null) {
      return;
    }
    const pending = this.pending.get(message.id);
    if (!pending) {
      return;
    }
    this.pending.delete(message.id);
    if (message.error) {
      pending.reject(new ResponseError(message.error.code, message.error.message));
    } else {
      pending.resolve(message.result ?? null);
    }
  }

  /** The transport closed: every request still waiting fails. */
  dispose(): void {
    if (this.closed) {
      return;
    }
    this.closed = true;
    for (const [, pending] of this.pending) {
      pending.reject(new Error(`connection closed (${pending.method})`));
    }
    this.pending.clear();
    this.transport.close();
  }

  private async answer(id: number | string, method: string, params: unknown): Promise<void> {
    const handler = this.requestHandlers.get(method);
    if (!handler) {
      this.send({
        jsonrpc: '2.0',
        id,
        error: { code: METHOD_NOT_FOUND, message: `unhandled method ${method}` }
      });
      return;
    }
    try {
      const result = await handler(params);
      this.send({ jsonrpc: '2.0', id, result: result ?? null });
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err);
      this.send({ jsonrpc: '2.0', id, error: { code: -32603, message: text } });
    }
  }

  private send(message: RpcMessage): void {
    this.transport.send(JSON.stringify(message));
  }
}
