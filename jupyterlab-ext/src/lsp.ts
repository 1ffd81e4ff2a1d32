/**
 * The parts of LSP this extension uses, and pure helpers over them: positions to offsets,
 * applying edits to a cell's text, reading torchdoctor's fixes from a diagnostic's `data`.
 */

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export interface TextEdit {
  range: Range;
  newText: string;
}

export interface Diagnostic {
  range: Range;
  message: string;
  severity?: number;
  code?: string | number;
  codeDescription?: { href: string };
  source?: string;
  data?: unknown;
}

export interface PublishDiagnosticsParams {
  uri: string;
  version?: number;
  diagnostics: Diagnostic[];
}

export interface WorkspaceEdit {
  changes?: Record<string, TextEdit[]>;
  documentChanges?: { textDocument: { uri: string; version?: number | null }; edits: TextEdit[] }[];
}

export interface CodeAction {
  title: string;
  kind?: string;
  edit?: WorkspaceEdit;
  data?: unknown;
}

export type Applicability = 'safe' | 'unsafe' | 'display';

/** One fix as torchdoctor stores it in `Diagnostic.data.fixes`. */
export interface Fix {
  title: string;
  applicability: Applicability;
  /** Edits by document URI: a fix may also touch another cell (an import, say). */
  edits: Map<string, TextEdit[]>;
}

export const SOURCE = 'torchdoctor';
/** The source of a finding measured by `torchdoctor run` that no static finding took. */
export const RUN_SOURCE = 'torchdoctor run';
export const FIX_ALL_KIND = 'source.fixAll.torchdoctor';
export const NOTEBOOK_FIX_ALL_KIND = 'notebook.source.fixAll.torchdoctor';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function rangeOf(value: unknown): Range | null {
  if (!Array.isArray(value) || value.length !== 4 || !value.every(v => typeof v === 'number')) {
    return null;
  }
  const [a, b, c, d] = value as [number, number, number, number];
  return { start: { line: a, character: b }, end: { line: c, character: d } };
}

/** The fixes torchdoctor attached to a diagnostic (none for another server's diagnostic). */
export function fixesOf(diagnostic: Diagnostic, uri: string): Fix[] {
  if (diagnostic.source !== SOURCE || !isRecord(diagnostic.data)) {
    return [];
  }
  const raw = diagnostic.data.fixes;
  if (!Array.isArray(raw)) {
    return [];
  }
  const fixes: Fix[] = [];
  for (const item of raw) {
    if (!isRecord(item) || typeof item.title !== 'string' || !Array.isArray(item.edits)) {
      continue;
    }
    const applicability = item.applicability;
    if (applicability !== 'safe' && applicability !== 'unsafe' && applicability !== 'display') {
      continue;
    }
    const edits = new Map<string, TextEdit[]>();
    let valid = true;
    for (const edit of item.edits) {
      const range = isRecord(edit) ? rangeOf(edit.range) : null;
      if (!isRecord(edit) || range === null || typeof edit.newText !== 'string') {
        valid = false;
        break;
      }
      const target = typeof edit.uri === 'string' ? edit.uri : uri;
      const list = edits.get(target) ?? [];
      list.push({ range, newText: edit.newText });
      edits.set(target, list);
    }
    if (valid && applicability !== 'display') {
      fixes.push({ title: item.title, applicability, edits });
    }
  }
  return fixes;
}

/** The edits of a workspace edit, by document URI. */
export function editsByUri(edit: WorkspaceEdit | undefined): Map<string, TextEdit[]> {
  const out = new Map<string, TextEdit[]>();
  if (!edit) {
    return out;
  }
  for (const [uri, edits] of Object.entries(edit.changes ?? {})) {
    out.set(uri, [...(out.get(uri) ?? []), ...edits]);
  }
  for (const change of edit.documentChanges ?? []) {
    const uri = change.textDocument.uri;
    out.set(uri, [...(out.get(uri) ?? []), ...change.edits]);
  }
  return out;
}

/** The offset in `text` of an LSP position (UTF-16 code units, as JavaScript strings count). */
export function offsetAt(text: string, position: Position): number {
  let offset = 0;
  for (let line = 0; line < position.line; line++) {
    const next = text.indexOf('\n', offset);
    if (next < 0) {
      return text.length;
    }
    offset = next + 1;
  }
  const end = text.indexOf('\n', offset);
  const lineEnd = end < 0 ? text.length : end;
  return Math.min(offset + position.character, lineEnd);
}

/** Edits as offset changes, last first (so each applies to the text the previous one left). */
export function toChanges(
  text: string,
  edits: readonly TextEdit[]
): { from: number; to: number; insert: string }[] {
  return edits
    .map(edit => ({
      from: offsetAt(text, edit.range.start),
      to: offsetAt(text, edit.range.end),
      insert: edit.newText
    }))
    .sort((a, b) => b.from - a.from || b.to - a.to);
}

/** The text after the edits. */
export function applyEdits(text: string, edits: readonly TextEdit[]): string {
  let out = text;
  for (const change of toChanges(text, edits)) {
    out = out.slice(0, change.from) + change.insert + out.slice(change.to);
  }
  return out;
}

/** Whether a diagnostic is torchdoctor's: a static finding or a measured one. */
export function isOurs(diagnostic: Diagnostic): boolean {
  return diagnostic.source === SOURCE || diagnostic.source === RUN_SOURCE;
}

/** What `torchdoctor run` measured for a finding (`data.measured.summary`), or null. */
export function measuredOf(diagnostic: Diagnostic): string | null {
  if (!isOurs(diagnostic) || !isRecord(diagnostic.data)) {
    return null;
  }
  const measured = diagnostic.data.measured;
  if (!isRecord(measured) || typeof measured.summary !== 'string' || measured.summary === '') {
    return null;
  }
  return measured.summary;
}

export function codeOf(diagnostic: Diagnostic): string {
  return diagnostic.code === undefined ? '' : String(diagnostic.code);
}

export function severityName(severity: number | undefined): 'error' | 'warning' | 'info' | 'hint' {
  switch (severity) {
    case 1:
      return 'error';
    case 3:
      return 'info';
    case 4:
      return 'hint';
    default:
      return 'warning';
  }
}

/**
 * The edits of a workspace edit split by the document (notebook or file) that owns each URI,
 * or null when a URI belongs to none of them: a workspace edit applies as a whole or not at
 * all, so that a fix that touches several cells never lands in part.
 */
export function splitByOwner<T>(
  edits: ReadonlyMap<string, TextEdit[]>,
  owners: Iterable<T>,
  owns: (owner: T, uri: string) => boolean
): Map<T, Map<string, TextEdit[]>> | null {
  const list = [...owners];
  const out = new Map<T, Map<string, TextEdit[]>>();
  for (const [uri, textEdits] of edits) {
    const owner = list.find(o => owns(o, uri));
    if (owner === undefined) {
      return null;
    }
    const mine = out.get(owner) ?? new Map<string, TextEdit[]>();
    mine.set(uri, textEdits);
    out.set(owner, mine);
  }
  return out;
}
