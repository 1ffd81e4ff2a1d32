import { describe, expect, it } from 'vitest';

import { ExecuteReplyContent, ExecutionWatcher, KernelProbe, LiveController, ProbeKernel } from '../src/kernelProbe';
import { LiveState, ProbeHelper } from '../src/live';

const HELPER: ProbeHelper = { module: '_torchdoctor_probe_abc', install: 'INSTALL()' };
const pyRepr = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const answer = (value: unknown) => ({ status: 'ok', data: { 'text/plain': pyRepr(JSON.stringify(value)) } });
const X = { kind: 'tensor', shape: [2], dtype: 'torch.float32', device: 'cpu', stride: [1], is_contiguous: true };

/** A kernel that answers like ipykernel with torchdoctor's helper: it forgets the helper (and its
 * subshells) when it "restarts". */
class FakeKernel implements ProbeKernel {
  readonly id = 'k1';
  supportsSubshells = false;
  installed = false;
  subshells: string[] = [];
  made = 0;
  sent: { expressions: Record<string, string>; subshell: string | null }[] = [];
  facts: Record<string, unknown> = { x: X };
  hold: Promise<void> | null = null;
  count = 3;

  async execute(expressions: Record<string, string>, subshell: string | null): Promise<ExecuteReplyContent> {
    this.sent.push({ expressions, subshell });
    if (this.hold) {
      await this.hold;
    }
    if (subshell !== null && !this.subshells.includes(subshell)) {
      return { status: 'error', ename: 'SubshellNotFound' };
    }
    const user_expressions: NonNullable<ExecuteReplyContent['user_expressions']> = {};
    if ('i' in expressions) {
      this.installed = true;
      user_expressions.i = { status: 'ok', data: { 'text/plain': 'True' } };
    }
    const literal = expressions.r!.slice(expressions.r!.indexOf('.probe(') + 7, -1);
    const request = JSON.parse(JSON.parse(literal) as string);
    expect(request.scan).toBe(true);
    user_expressions.r = this.installed
      ? answer({ v: 1, facts: this.facts, scanned: Object.keys(this.facts), kernel: { torch: '2.13.0' } })
      : { status: 'error', ename: 'KeyError', evalue: `'${HELPER.module}'` };
    return { status: 'ok', execution_count: this.count, user_expressions };
  }

  async createSubshell(): Promise<string | null> {
    const id = `s${++this.made}`;
    this.subshells.push(id);
    return id;
  }

  deleteSubshell(id: string): void {
    this.subshells = this.subshells.filter(s => s !== id);
  }

  restart(): void {
    this.installed = false;
    this.subshells = [];
  }
}

describe('KernelProbe', () => {
  it('installs the helper once, and again after a restart', async () => {
    const kernel = new FakeKernel();
    const probe = new KernelProbe(kernel, async () => HELPER);
    const first = await probe.probe();
    expect(first.facts.x).toEqual(X);
    expect(first.executionCount).toBe(3);
    expect(Object.keys(kernel.sent[0]!.expressions)).toEqual(['i', 'r']);
    await probe.probe();
    expect(Object.keys(kernel.sent[1]!.expressions)).toEqual(['r']);
    kernel.restart(); // the plugin was not told: the KeyError says so
    await probe.probe();
    expect(kernel.sent.slice(2).map(s => Object.keys(s.expressions))).toEqual([['r'], ['i', 'r']]);
    // Every request is silent and leaves no history: the adapter sends them (see bindings.ts).
  });

  it('uses a subshell when the kernel offers them, and makes a new one after a restart', async () => {
    const kernel = new FakeKernel();
    kernel.supportsSubshells = true;
    const probe = new KernelProbe(kernel, async () => HELPER);
    await probe.probe();
    expect(kernel.sent.map(s => s.subshell)).toEqual(['s1']);
    kernel.restart();
    await probe.probe();
    // The old subshell is gone: a new one, and the helper installed again there.
    expect(kernel.sent.map(s => s.subshell)).toEqual(['s1', 's1', 's2']);
    expect(Object.keys(kernel.sent[2]!.expressions)).toEqual(['i', 'r']);
    probe.dispose();
    await Promise.resolve();
    await Promise.resolve();
    expect(kernel.subshells).toEqual([]);
  });
});

describe('ExecutionWatcher', () => {
  const msg = (type: string, parent: string, state?: string) => ({
    header: { msg_type: type },
    parent_header: { msg_id: parent },
    content: state ? { execution_state: state } : {}
  });

  it('reports a user execution (execute_input, then idle), never a silent probe', () => {
    const w = new ExecutionWatcher();
    expect(w.handle(msg('status', 'probe', 'busy'))).toBe(false);
    expect(w.handle(msg('status', 'probe', 'idle'))).toBe(false);
    expect(w.handle(msg('status', 'cell', 'busy'))).toBe(false);
    expect(w.handle(msg('execute_input', 'cell'))).toBe(false);
    expect(w.handle(msg('stream', 'cell'))).toBe(false);
    expect(w.handle(msg('status', 'cell', 'idle'))).toBe(true);
    expect(w.handle(msg('status', 'cell', 'idle'))).toBe(false);
  });
});

describe('LiveController', () => {
  function setup(enabled = { on: true }) {
    const states: LiveState[] = [];
    const timers: (() => void)[] = [];
    const kernel = new FakeKernel();
    const live = new LiveController({
      helper: async () => HELPER,
      enabled: () => enabled.on,
      changed: state => states.push(state),
      setTimer: fn => timers.push(fn),
      clearTimer: () => undefined
    });
    return { live, kernel, states, timers };
  }
  const settle = () => new Promise(resolve => setTimeout(resolve, 0));

  it('probes when the kernel appears and after each user execution', async () => {
    const { live, kernel, states } = setup();
    live.setKernel(kernel);
    expect(live.state.status).toBe('waiting');
    await settle();
    expect(live.state.status).toBe('ready');
    expect(live.state.result!.facts.x).toEqual(X);
    kernel.facts = { x: X, y: { ...X, shape: [1, 2] } };
    live.iopub({ header: { msg_type: 'execute_input' }, parent_header: { msg_id: 'c' } });
    live.iopub({ header: { msg_type: 'status' }, parent_header: { msg_id: 'c' }, content: { execution_state: 'idle' } });
    await settle();
    expect(Object.keys(live.state.result!.facts)).toEqual(['x', 'y']);
    expect(states.map(s => s.status)).toEqual(['waiting', 'ready', 'ready']);
    live.setKernel(null);
    expect(live.state.status).toBe('no-kernel');
  });

  it('says "kernel busy" while a probe waits, and probes once more for requests made meanwhile', async () => {
    const { live, kernel, timers } = setup();
    let release: () => void = () => undefined;
    kernel.hold = new Promise<void>(resolve => {
      release = resolve;
    });
    live.setKernel(kernel);
    live.refresh();
    live.refresh();
    await settle();
    expect(kernel.sent).toHaveLength(1);
    timers[0]!(); // the busy timer fires
    expect(live.state.busy).toBe(true);
    kernel.hold = null;
    release();
    await settle();
    await settle();
    expect(kernel.sent).toHaveLength(2); // one more probe, not two
    expect(live.state).toMatchObject({ status: 'ready', busy: false });
  });

  it('is off when the bridge setting is off', async () => {
    const enabled = { on: false };
    const { live, kernel } = setup(enabled);
    live.setKernel(kernel);
    await settle();
    expect(live.state.status).toBe('off');
    expect(kernel.sent).toHaveLength(0);
    enabled.on = true;
    live.settingsChanged();
    await settle();
    expect(live.state.status).toBe('ready');
  });

  it('forgets the facts of a restarted kernel', async () => {
    const { live, kernel } = setup();
    live.setKernel(kernel);
    await settle();
    kernel.restart();
    kernel.facts = {};
    live.restarted();
    expect(live.state).toMatchObject({ status: 'waiting', result: null });
    live.refresh();
    await settle();
    expect(live.state.result!.scanned).toEqual([]);
  });
});
