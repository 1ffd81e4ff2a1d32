/**
 * Extension settings, read without the `vscode` module so that they can be unit tested.
 *
 * `readSettings` turns raw configuration values into a typed, validated object; `toServerOptions`
 * builds what the language server receives as `initializationOptions` and as the answer to
 * `workspace/configuration` for the section "torchdoctor".
 */

export const SECTION = "torchdoctor";

export const LOG_LEVELS = ["error", "warning", "info", "debug"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const DEFAULT_DEBOUNCE_MS = 100;
export const MAX_DEBOUNCE_MS = 5000;

export interface Settings {
  enable: boolean;
  select: string[];
  ignore: string[];
  extendSelect: string[];
  /** `null`: not set in the editor, the project's `pyproject.toml` (or the default) holds. */
  unsafeFixes: boolean | null;
  fixAll: boolean;
  debounceMs: number;
  bridge: boolean;
  /** A kernel's connection file for the kernel bridge; empty: found from the notebook. */
  kernelConnectionFile: string;
  logLevel: LogLevel;
  docsBaseUrl: string;
  interpreter: string;
}

/** What the server accepts in `initializationOptions` and `workspace/configuration`. */
export interface ServerOptions {
  enable: boolean;
  /** `null` keeps the server's default selection (and the project's `pyproject.toml`). */
  select: string[] | null;
  ignore: string[];
  extendSelect: string[];
  /** `null` keeps the project's `unsafe-fixes` (default: off). */
  unsafeFixes: boolean | null;
  debounceMs: number;
  /** `null` keeps the server's default (the documentation installed with the package). */
  docsBaseUrl: string | null;
  logLevel: LogLevel;
  bridge: boolean;
  /** `null`: find the kernel of each notebook from the Jupyter runtime folder. */
  kernelConnectionFile: string | null;
}

export interface ReadResult {
  settings: Settings;
  /** Human-readable notes about values that were ignored or corrected. */
  problems: string[];
}

export const DEFAULTS: Readonly<Settings> = Object.freeze({
  enable: true,
  select: [],
  ignore: [],
  extendSelect: [],
  unsafeFixes: null,
  fixAll: true,
  debounceMs: DEFAULT_DEBOUNCE_MS,
  bridge: true,
  kernelConnectionFile: "",
  logLevel: "info",
  docsBaseUrl: "",
  interpreter: "",
});

/** A rule selector: `ALL` or a code prefix (`TDR`, `TDR1`, `TDR105`). */
const SELECTOR = /^(ALL|[A-Z]{1,8}[0-9]{0,4})$/;

/**
 * Reads and validates settings. `get` returns the raw value of a key below the section
 * (`get("select")` for `torchdoctor.select`), or `undefined` when it is not set.
 */
export function readSettings(get: (key: string) => unknown): ReadResult {
  const problems: string[] = [];

  const bool = (key: keyof Settings, fallback: boolean): boolean => {
    const value = get(key);
    if (value === undefined || value === null) return fallback;
    if (typeof value === "boolean") return value;
    problems.push(`torchdoctor.${key} must be true or false; using ${String(fallback)}.`);
    return fallback;
  };

  const selectors = (key: "select" | "ignore" | "extendSelect"): string[] => {
    const value = get(key);
    if (value === undefined || value === null) return [];
    const items = typeof value === "string" ? value.split(",") : value;
    if (!Array.isArray(items)) {
      problems.push(`torchdoctor.${key} must be a list of rule codes; ignored.`);
      return [];
    }
    const out: string[] = [];
    for (const item of items) {
      if (typeof item !== "string") {
        problems.push(`torchdoctor.${key}: ${JSON.stringify(item)} is not a rule code; ignored.`);
        continue;
      }
      const trimmed = item.trim();
      if (trimmed === "") continue;
      const normalised = trimmed.toUpperCase();
      if (!SELECTOR.test(normalised)) {
        problems.push(`torchdoctor.${key}: "${trimmed}" is not a rule code or prefix; ignored.`);
        continue;
      }
      if (!out.includes(normalised)) out.push(normalised);
    }
    return out;
  };

  const debounce = (): number => {
    const value = get("debounceMs");
    if (value === undefined || value === null) return DEFAULT_DEBOUNCE_MS;
    if (typeof value !== "number" || !Number.isFinite(value)) {
      problems.push(`torchdoctor.debounceMs must be a number; using ${DEFAULT_DEBOUNCE_MS}.`);
      return DEFAULT_DEBOUNCE_MS;
    }
    const clamped = Math.min(MAX_DEBOUNCE_MS, Math.max(0, Math.round(value)));
    if (clamped !== value) {
      problems.push(`torchdoctor.debounceMs must be between 0 and ${MAX_DEBOUNCE_MS}; using ${clamped}.`);
    }
    return clamped;
  };

  const logLevel = (): LogLevel => {
    const value = get("logLevel");
    if (value === undefined || value === null) return DEFAULTS.logLevel;
    const lowered = typeof value === "string" ? value.toLowerCase() : value;
    if (lowered === "warn") return "warning";
    if ((LOG_LEVELS as readonly unknown[]).includes(lowered)) return lowered as LogLevel;
    problems.push(`torchdoctor.logLevel must be one of ${LOG_LEVELS.join(", ")}; using ${DEFAULTS.logLevel}.`);
    return DEFAULTS.logLevel;
  };

  const docsBaseUrl = (): string => {
    const value = get("docsBaseUrl");
    if (value === undefined || value === null || value === "") return "";
    if (typeof value === "string") {
      const trimmed = value.trim();
      if (trimmed === "") return "";
      if (isHttpUrl(trimmed)) return trimmed.endsWith("/") ? trimmed : `${trimmed}/`;
    }
    problems.push("torchdoctor.docsBaseUrl must be an http(s) URL; using the default documentation.");
    return "";
  };

  const kernelConnectionFile = (): string => {
    const value = get("kernelConnectionFile");
    if (value === undefined || value === null) return "";
    if (typeof value === "string") return value.trim();
    problems.push("torchdoctor.kernelConnectionFile must be a path or a kernel id; ignored.");
    return "";
  };

  const interpreter = (): string => {
    const { value, problem } = interpreterSettingValue(get("interpreter"));
    if (problem !== undefined) problems.push(problem);
    return value ?? "";
  };

  const settings: Settings = {
    enable: bool("enable", DEFAULTS.enable),
    select: selectors("select"),
    ignore: selectors("ignore"),
    extendSelect: selectors("extendSelect"),
    unsafeFixes: get("unsafeFixes") === undefined ? null : bool("unsafeFixes", false),
    fixAll: bool("fixAll", DEFAULTS.fixAll),
    debounceMs: debounce(),
    bridge: bool("bridge", DEFAULTS.bridge),
    kernelConnectionFile: kernelConnectionFile(),
    logLevel: logLevel(),
    docsBaseUrl: docsBaseUrl(),
    interpreter: interpreter(),
  };
  return { settings, problems };
}

/**
 * A `torchdoctor.interpreter` value as written in a settings file: a path (`"~/venv/bin/python"`),
 * or a list of one path (`["~/venv/bin/python"]`, the form of Ruff's `ruff.interpreter`).
 * `value`: the trimmed path, `undefined` when unset or blank or wrongly typed; `problem`: what is
 * wrong with a value that is ignored (`where` names its scope, e.g. " (workspace settings)").
 */
export function interpreterSettingValue(raw: unknown, where = ""): { value?: string; problem?: string } {
  if (raw === undefined || raw === null) return {};
  let item: unknown = raw;
  if (Array.isArray(raw)) {
    if (raw.length === 0) return {};
    if (raw.length > 1) {
      return {
        problem: `torchdoctor.interpreter${where} must be one path (a string, or a list of one string); it is a list of ${raw.length} entries, so it is ignored.`,
      };
    }
    item = raw[0];
  }
  if (typeof item !== "string") {
    return {
      problem: `torchdoctor.interpreter${where} must be a path to a Python executable (a string), not ${describeJson(raw)}; it is ignored.`,
    };
  }
  const trimmed = item.trim();
  return trimmed === "" ? {} : { value: trimmed };
}

function describeJson(value: unknown): string {
  const type = typeof value;
  const kind = Array.isArray(value) ? "a list" : type === "object" ? "an object" : `a ${type}`;
  let text: string;
  try {
    text = JSON.stringify(value);
  } catch {
    text = String(value);
  }
  return `${kind} (${text.length > 60 ? `${text.slice(0, 57)}...` : text})`;
}

export function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}

export function toServerOptions(settings: Settings): ServerOptions {
  return {
    enable: settings.enable,
    select: settings.select.length > 0 ? [...settings.select] : null,
    ignore: [...settings.ignore],
    extendSelect: [...settings.extendSelect],
    unsafeFixes: settings.unsafeFixes,
    debounceMs: settings.debounceMs,
    docsBaseUrl: settings.docsBaseUrl === "" ? null : settings.docsBaseUrl,
    logLevel: settings.logLevel,
    bridge: settings.bridge,
    kernelConnectionFile: settings.kernelConnectionFile === "" ? null : settings.kernelConnectionFile,
  };
}

/** Keys whose change is handled by the client alone, without restarting the server. */
const CLIENT_ONLY: ReadonlySet<keyof Settings> = new Set<keyof Settings>(["fixAll"]);

/** Whether going from `before` to `after` needs the server restarted. */
export function needsRestart(before: Settings, after: Settings): boolean {
  for (const key of Object.keys(after) as (keyof Settings)[]) {
    if (CLIENT_ONLY.has(key)) continue;
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) return true;
  }
  return false;
}

export const DEFAULT_DOCS_URL = "https://torchdoctor.dev/";

/** The documentation page of one rule (`TDR105`), or the rule index when `code` is empty. */
export function ruleDocsUrl(code: string, docsBaseUrl: string): string {
  const base = docsBaseUrl === "" ? DEFAULT_DOCS_URL : docsBaseUrl.endsWith("/") ? docsBaseUrl : `${docsBaseUrl}/`;
  const trimmed = code.trim().toUpperCase();
  if (!/^[A-Z]+[0-9]+$/.test(trimmed)) return `${base}rules/`;
  return `${base}rules/${trimmed}/`;
}
