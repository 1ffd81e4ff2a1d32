/**
 * The "Live tensors" section's logic, without JupyterLab: the probe request the panel sends
 * through the notebook's own kernel connection (a silent `user_expressions` entry calling
 * torchdoctor's kernel-side helper, as the language server's kernel bridge does), reading the
 * reply (the `repr()` of a JSON string: parsed as a Python string literal, never evaluated),
 * and the rows the panel shows for each tensor and module.
 */

import type { PanelText } from './panel';

/** What the kernel helper answered for one name (see `bridge/_kernel_probe.py`). */
export type FactDict = Record<string, unknown>;

export interface ProbeResult {
  /** Facts by name, in the order the kernel listed them. */
  facts: Record<string, FactDict>;
  /** The names the namespace scan found (top-level tensors and modules). */
  scanned: string[];
  /** Kernel facts (`torch`: its version, or null when torch is not imported). */
  kernel: FactDict;
  /** The count of the last cell the user ran when the facts were read. */
  executionCount: number | null;
}

/** The server extension's `GET /torchdoctor/probe`: the helper module and its installer. */
export interface ProbeHelper {
  module: string;
  install: string;
}

export const LIVE_CODES = new Set(['TDR901', 'TDR902', 'TDR903', 'TDR904']);
export const PROBE_BUDGET_S = 1.0;

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
const INDEX = /^[0-9]+$/;
const KEYWORDS = new Set(
  (
    'False None True and as assert async await break class continue def del elif else except ' +
    'finally for from global if import in is lambda nonlocal not or pass raise return try while ' +
    'with yield'
  ).split(' ')
);

/** A dotted name as torchdoctor accepts it (`x`, `model.fc.weight`, `model.0.weight`). */
export function isValidName(name: string): boolean {
  if (name.length === 0 || name.length > 200) {
    return false;
  }
  const [first, ...rest] = name.split('.');
  const ident = (p: string) => IDENT.test(p) && !KEYWORDS.has(p);
  return first !== undefined && ident(first) && rest.every(p => ident(p) || INDEX.test(p));
}

/** The probe request (JSON): the namespace scan, plus any names asked for explicitly. */
export function probeRequest(names: readonly string[] = [], budget = PROBE_BUDGET_S): string {
  return JSON.stringify({
    v: 1,
    names: names.filter(isValidName),
    views: [],
    kernel: true,
    scan: true,
    budget
  });
}

/**
 * The user expression that calls the installed helper. The request travels as a string
 * literal: JSON.stringify of a string is a valid Python string literal with the same value
 * (it only uses the escapes `\" \\ \n \r \t \b \f \uXXXX`, all of which Python reads alike).
 */
export function probeExpression(module: string, request: string): string {
  if (!IDENT.test(module)) {
    throw new Error(`not a module name: ${module}`);
  }
  return `__import__("sys").modules[${JSON.stringify(module)}].probe(${JSON.stringify(request)})`;
}

/** Read a Python string literal (a `repr()` of a `str`, with an optional b/r/u prefix
 * rejected): the kernel's answer. Throws on anything else. */
export function parsePythonString(text: string): string {
  const s = text.trim();
  const quote = s[0];
  if ((quote !== "'" && quote !== '"') || s.length < 2 || s[s.length - 1] !== quote) {
    throw new Error('not a Python string literal');
  }
  let out = '';
  const end = s.length - 1;
  for (let i = 1; i < end; i++) {
    const ch = s[i] as string;
    if (ch === quote) {
      throw new Error('not a single Python string literal');
    }
    if (ch !== '\\') {
      out += ch;
      continue;
    }
    i++;
    if (i >= end) {
      throw new Error('a Python string literal ends in a backslash');
    }
    const e = s[i] as string;
    const simple: Record<string, string> = {
      '\\': '\\',
      "'": "'",
      '"': '"',
      n: '\n',
      r: '\r',
      t: '\t',
      b: '\b',
      f: '\f',
      v: '\v',
      a: '\x07'
    };
    const hexLength = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0;
    if (hexLength > 0) {
      const hex = s.slice(i + 1, i + 1 + hexLength);
      if (hex.length !== hexLength || !/^[0-9a-fA-F]+$/.test(hex)) {
        throw new Error('a bad escape in a Python string literal');
      }
      out += String.fromCodePoint(parseInt(hex, 16));
      i += hexLength;
    } else if (simple[e] !== undefined) {
      out += simple[e];
    } else {
      throw new Error(`an unexpected escape \\${e} in a Python string literal`);
    }
  }
  return out;
}

export interface ExpressionResult {
  status?: string;
  data?: Record<string, unknown>;
  ename?: string;
  evalue?: string;
}

/** One `user_expressions` result: the value of a JSON string the helper returned (`True`
 * for the installer). */
export function parseExpressionReply(entry: ExpressionResult | undefined): unknown {
  if (!entry || entry.status !== 'ok') {
    throw new Error(`probe failed in the kernel: ${entry?.ename ?? '?'}: ${entry?.evalue ?? ''}`);
  }
  const text = entry.data?.['text/plain'];
  if (typeof text !== 'string') {
    throw new Error('probe answered without text');
  }
  if (text === 'True' || text === 'False') {
    return text === 'True';
  }
  return JSON.parse(parsePythonString(text)) as unknown;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The probe's reply as the panel keeps it. */
export function toProbeResult(value: unknown, executionCount: unknown): ProbeResult {
  if (!isRecord(value) || !isRecord(value.facts)) {
    throw new Error('probe answered with something unexpected');
  }
  const facts: Record<string, FactDict> = {};
  for (const [name, fact] of Object.entries(value.facts)) {
    if (isRecord(fact)) {
      facts[name] = fact;
    }
  }
  const scanned = Array.isArray(value.scanned)
    ? value.scanned.filter((n): n is string => typeof n === 'string')
    : [];
  return {
    facts,
    scanned,
    kernel: isRecord(value.kernel) ? value.kernel : {},
    executionCount: typeof executionCount === 'number' ? executionCount : null
  };
}

// ---- rows ----------------------------------------------------------------------------------

export interface LiveField {
  /** The field's name: also its CSS class (`jp-torchdoctor-live-<key>`). */
  key: string;
  text: string;
  /** Worth a second look (a tensor that is not contiguous, a module in train mode). */
  warn?: boolean;
}

export interface LiveItem {
  name: string;
  kind: 'tensor' | 'module';
  fields: LiveField[];
  /** Plain values for `data-*` attributes (tests and styles read them). */
  attrs: Record<string, string>;
}

function ints(value: unknown): number[] | null {
  return Array.isArray(value) && value.every(v => typeof v === 'number') ? value : null;
}

export function formatTuple(values: readonly number[]): string {
  return values.length === 1 ? `(${values[0]},)` : `(${values.join(', ')})`;
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  const shown = unit === 0 ? String(value) : value.toFixed(value >= 100 ? 0 : 1).replace(/\.0$/, '');
  return `${shown} ${units[unit]}`;
}

export function formatCount(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function short(dtype: unknown): string {
  return typeof dtype === 'string' ? dtype.replace(/^torch\./, '') : '?';
}

function tensorItem(name: string, f: FactDict, text: PanelText): LiveItem {
  const fields: LiveField[] = [];
  const attrs: Record<string, string> = {};
  const shape = ints(f.shape);
  if (typeof f.type === 'string') {
    fields.push({ key: 'type', text: f.type.split('.').pop() ?? f.type });
  }
  if (shape) {
    fields.push({ key: 'shape', text: formatTuple(shape) });
    attrs.shape = shape.join(',');
  }
  fields.push({ key: 'dtype', text: short(f.dtype) });
  if (typeof f.device === 'string') {
    fields.push({ key: 'device', text: f.device });
    attrs.device = f.device;
  }
  if (typeof f.unreadable === 'string') {
    fields.push({ key: 'unreadable', text: text.liveUnreadable, warn: true });
    return { name, kind: 'tensor', fields, attrs };
  }
  const stride = ints(f.stride);
  if (stride) {
    fields.push({ key: 'strides', text: text.liveStrides(formatTuple(stride)) });
    attrs.strides = stride.join(',');
  }
  if (typeof f.is_contiguous === 'boolean') {
    let shown = f.is_contiguous ? text.liveContiguous : text.liveNotContiguous;
    if (f.channels_last === true) {
      shown += ` (${text.liveChannelsLast})`;
    }
    fields.push({ key: 'contiguous', text: shown, warn: !f.is_contiguous });
    attrs.contiguous = String(f.is_contiguous);
  }
  if (typeof f.nbytes === 'number') {
    let size = formatBytes(f.nbytes);
    if (typeof f.storage_nbytes === 'number' && f.storage_nbytes !== f.nbytes) {
      size += ` (${text.liveStorage(formatBytes(f.storage_nbytes))})`;
    }
    fields.push({ key: 'size', text: size });
  }
  const grad: string[] = [];
  if (f.requires_grad === true) {
    grad.push('requires_grad');
  }
  if (typeof f.grad_fn === 'string') {
    grad.push(`grad_fn=${f.grad_fn}`);
  }
  if (f.is_inference === true) {
    grad.push('inference');
  }
  fields.push({ key: 'grad', text: grad.length > 0 ? grad.join(', ') : text.liveNoGrad });
  attrs.requiresGrad = String(f.requires_grad === true);
  return { name, kind: 'tensor', fields, attrs };
}

function moduleItem(name: string, f: FactDict, text: PanelText): LiveItem {
  const fields: LiveField[] = [];
  const attrs: Record<string, string> = {};
  const type = typeof f.type === 'string' ? f.type : '?';
  fields.push({ key: 'type', text: type.split('.').pop() ?? type });
  const devices = Array.isArray(f.devices) ? f.devices.filter(d => typeof d === 'string') : [];
  fields.push({ key: 'device', text: devices.length > 0 ? devices.join(', ') : text.liveNoParameters });
  attrs.device = devices.join(',');
  if (typeof f.training === 'boolean') {
    fields.push({ key: 'mode', text: f.training ? text.liveTrain : text.liveEval });
    attrs.mode = f.training ? 'train' : 'eval';
  }
  if (typeof f.num_parameters === 'number') {
    const trainable = typeof f.trainable_parameters === 'number' ? f.trainable_parameters : null;
    fields.push({
      key: 'params',
      text: text.liveParameters(
        formatCount(f.num_parameters),
        trainable !== null && trainable !== f.num_parameters ? formatCount(trainable) : null
      )
    });
  }
  if (f.truncated === true) {
    fields.push({ key: 'truncated', text: text.liveTruncated, warn: true });
  }
  return { name, kind: 'module', fields, attrs };
}

/** The panel's rows: the scanned tensors and modules (and any other name asked for that is
 * one), in the namespace's order. */
export function liveItems(result: ProbeResult, text: PanelText): LiveItem[] {
  const out: LiveItem[] = [];
  const names = [...result.scanned, ...Object.keys(result.facts).filter(n => !result.scanned.includes(n))];
  for (const name of names) {
    const f = result.facts[name];
    if (f?.kind === 'tensor') {
      out.push(tensorItem(name, f, text));
    } else if (f?.kind === 'module') {
      out.push(moduleItem(name, f, text));
    }
  }
  return out;
}

/** Whether the kernel has torch imported (the helper imports nothing itself). */
export function torchImported(result: ProbeResult): boolean {
  return typeof result.kernel.torch === 'string' || result.scanned.length > 0;
}

// ---- the section's state ---------------------------------------------------------------------

export type LiveStatus =
  | 'off' // the bridge setting is off
  | 'no-kernel' // the notebook has no kernel
  | 'waiting' // the first probe has not answered yet
  | 'ready'
  | 'error';

export interface LiveState {
  status: LiveStatus;
  /** The last facts read (kept while a new probe waits). */
  result: ProbeResult | null;
  /** A probe is waiting for a busy kernel (the list shows the last facts). */
  busy: boolean;
  error: string | null;
}

export const NO_KERNEL: LiveState = { status: 'no-kernel', result: null, busy: false, error: null };
