/**
 * Probes of the notebook's own kernel for the "Live tensors" section, without JupyterLab
 * imports (the plugin adapts its kernel connection to `ProbeKernel`).
 *
 * A probe is a silent `execute_request` (`code: ""`, `silent`, `store_history: false`) whose
 * only work is a `user_expressions` entry calling torchdoctor's kernel-side helper, installed
 * once as a private module in `sys.modules` (installed again when the kernel restarted). It
 * goes through a kernel subshell when the kernel offers one, so it answers while a cell runs;
 * on the main shell it waits behind the running cell and the section says "kernel busy". The
 * user's execution count, history and namespace stay as they were, and other frontends see
 * no `execute_input`, so the language server's own bridge does not take it for a user's run.
 */

import {
  ExpressionResult,
  LiveState,
  NO_KERNEL,
  parseExpressionReply,
  ProbeHelper,
  ProbeResult,
  probeExpression,
  probeRequest,
  toProbeResult
} from './live';

export interface ExecuteReplyContent {
  status?: string;
  execution_count?: number | null;
  user_expressions?: Record<string, ExpressionResult>;
  ename?: string;
  evalue?: string;
}

/** What a probe needs of a kernel connection. */
export interface ProbeKernel {
  readonly id: string;
  /** Whether the kernel advertises JEP 91 subshells (known once its info arrived). */
  readonly supportsSubshells: boolean;
  /** Resolves once the kernel's info arrived (so that `supportsSubshells` is known). */
  ready?(): Promise<void>;
  /** Send a silent execute request with these user expressions; the reply's content. */
  execute(expressions: Record<string, string>, subshellId: string | null): Promise<ExecuteReplyContent>;
  createSubshell(): Promise<string | null>;
  deleteSubshell(id: string): void;
}

export class KernelProbe {
  private installed = false;
  private subshell: Promise<string | null> | null = null;
  private disposed = false;

  constructor(
    readonly kernel: ProbeKernel,
    private readonly helper: () => Promise<ProbeHelper>
  ) {}

  /** The kernel restarted: its helper module and subshells are gone. */
  reset(): void {
    this.installed = false;
    this.subshell = null;
  }

  private subshellId(): Promise<string | null> {
    if (!this.kernel.supportsSubshells) {
      return Promise.resolve(null);
    }
    this.subshell ??= this.kernel.createSubshell().catch(() => null);
    return this.subshell;
  }

  /** Facts of the namespace's tensors and modules (and of `names`). */
  async probe(names: readonly string[] = []): Promise<ProbeResult> {
    const helper = await this.helper();
    const expr = probeExpression(helper.module, probeRequest(names));
    await this.kernel.ready?.();
    for (let attempt = 0; attempt < 3; attempt++) {
      if (this.disposed) {
        throw new Error('the probe was closed');
      }
      const expressions: Record<string, string> =
        this.installed && attempt === 0 ? { r: expr } : { i: helper.install, r: expr };
      const subshell = await this.subshellId();
      const content = await this.kernel.execute(expressions, subshell);
      if (content.status === 'error' && (content.ename ?? '').toLowerCase().includes('subshell')) {
        this.subshell = null; // the kernel restarted and forgot our subshell: make a new one
        continue;
      }
      const results = content.user_expressions ?? {};
      if ('i' in results) {
        parseExpressionReply(results.i);
        this.installed = true;
      }
      const entry = results.r;
      if (entry?.status === 'error' && entry.ename === 'KeyError' && (entry.evalue ?? '').includes(helper.module)) {
        this.installed = false; // the kernel restarted: install the helper again
        continue;
      }
      return toProbeResult(parseExpressionReply(entry), content.execution_count);
    }
    throw new Error('the probe could not be installed in the kernel');
  }

  dispose(): void {
    if (this.disposed) {
      return;
    }
    this.disposed = true;
    const subshell = this.subshell;
    this.subshell = null;
    void subshell?.then(id => {
      if (id !== null) {
        this.kernel.deleteSubshell(id);
      }
    });
  }
}

/** An IOPub message, as much of it as the watcher reads. */
export interface IopubMessage {
  header: { msg_type: string };
  parent_header?: { msg_id?: string } | Record<string, never>;
  content?: { execution_state?: string };
}

/**
 * "A user's cell finished": an `execute_input` (silent requests, probes included, publish
 * none) followed by `status: idle` for the same request, from any frontend of the kernel.
 */
export class ExecutionWatcher {
  private readonly running = new Set<string>();

  /** Feed one IOPub message; true when it ends a user's execution. */
  handle(msg: IopubMessage): boolean {
    const parent = (msg.parent_header as { msg_id?: string } | undefined)?.msg_id;
    if (!parent) {
      return false;
    }
    if (msg.header.msg_type === 'execute_input') {
      this.running.add(parent);
      if (this.running.size > 1000) {
        const first = this.running.values().next();
        if (!first.done) {
          this.running.delete(first.value);
        }
      }
      return false;
    }
    if (msg.header.msg_type === 'status' && msg.content?.execution_state === 'idle') {
      return this.running.delete(parent);
    }
    return false;
  }

  clear(): void {
    this.running.clear();
  }
}

export interface LiveOptions {
  helper: () => Promise<ProbeHelper>;
  /** The section changed. */
  changed: (state: LiveState) => void;
  /** Whether live facts are on (the `bridge` and `enable` settings). */
  enabled: () => boolean;
  /** After this long without an answer the section says "kernel busy" (ms). */
  busyAfterMs?: number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
}

export const BUSY_AFTER_MS = 1500;

/**
 * One notebook's live section: probes its kernel when the kernel appears, after each cell a
 * user ran, and on request; one probe at a time (a request while one waits probes once more
 * when it answered).
 */
export class LiveController {
  private probe: KernelProbe | null = null;
  private inFlight = false;
  private again = false;
  private busyTimer: unknown = null;
  private current: LiveState = NO_KERNEL;
  private readonly watcher = new ExecutionWatcher();
  private disposed = false;

  constructor(private readonly options: LiveOptions) {}

  get state(): LiveState {
    return this.current;
  }

  get kernel(): ProbeKernel | null {
    return this.probe?.kernel ?? null;
  }

  private set(state: LiveState): void {
    this.current = state;
    if (!this.disposed) {
      this.options.changed(state);
    }
  }

  /** The notebook's kernel changed (null: none). */
  setKernel(kernel: ProbeKernel | null): void {
    if (kernel !== null && this.probe?.kernel.id === kernel.id) {
      return;
    }
    this.probe?.dispose();
    this.watcher.clear();
    this.probe = kernel ? new KernelProbe(kernel, this.options.helper) : null;
    if (!kernel) {
      this.set(NO_KERNEL);
      return;
    }
    this.set({ status: this.options.enabled() ? 'waiting' : 'off', result: null, busy: false, error: null });
    this.refresh();
  }

  /** The kernel restarted (or is restarting): its namespace is new. */
  restarted(): void {
    this.probe?.reset();
    this.watcher.clear();
    if (this.probe) {
      this.set({ status: this.options.enabled() ? 'waiting' : 'off', result: null, busy: false, error: null });
    }
  }

  /** An IOPub message of the notebook's kernel. */
  iopub(msg: IopubMessage): void {
    if (this.watcher.handle(msg)) {
      this.refresh();
    }
  }

  /** The settings changed. */
  settingsChanged(): void {
    if (!this.probe) {
      return;
    }
    if (!this.options.enabled()) {
      this.set({ status: 'off', result: null, busy: false, error: null });
    } else if (this.current.status === 'off') {
      this.set({ status: 'waiting', result: null, busy: false, error: null });
      this.refresh();
    }
  }

  refresh(): void {
    const probe = this.probe;
    if (!probe || this.disposed || !this.options.enabled()) {
      return;
    }
    if (this.inFlight) {
      this.again = true;
      return;
    }
    this.inFlight = true;
    this.again = false;
    const setTimer = this.options.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
    const clearTimer =
      this.options.clearTimer ??
      (handle => {
        clearTimeout(handle as ReturnType<typeof setTimeout>);
      });
    this.busyTimer = setTimer(() => {
      if (this.probe === probe && this.inFlight) {
        this.set({ ...this.current, busy: true });
      }
    }, this.options.busyAfterMs ?? BUSY_AFTER_MS);
    const done = (next: LiveState | null) => {
      clearTimer(this.busyTimer);
      this.busyTimer = null;
      this.inFlight = false;
      if (this.probe !== probe || this.disposed) {
        return; // the kernel changed meanwhile
      }
      if (next) {
        this.set(next);
      }
      if (this.again) {
        this.refresh();
      }
    };
    probe.probe().then(
      result => {
        done({ status: 'ready', result, busy: false, error: null });
      },
      (err: unknown) => {
        const error = err instanceof Error ? err.message : String(err);
        done(this.options.enabled() ? { status: 'error', result: this.current.result, busy: false, error } : null);
      }
    );
  }

  dispose(): void {
    this.disposed = true;
    this.probe?.dispose();
    this.probe = null;
  }
}
