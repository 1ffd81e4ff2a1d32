/**
 * Talking to a Python interpreter: checking that torchdoctor's server can run there, and
 * installing torchdoctor into it. No `vscode` import.
 */
import { spawn } from "node:child_process";
import * as path from "node:path";

export const MIN_PYTHON: readonly [number, number] = [3, 10];

/** Printed as one JSON line by the probe; imports nothing but the standard library. */
export const PROBE_SCRIPT = [
  "import importlib.util as u, json, sys",
  "def has(m):",
  "    try:",
  "        return u.find_spec(m) is not None",
  "    except Exception:",
  "        return False",
  "v = None",
  "if has('torchdoctor'):",
  "    try:",
  "        from importlib.metadata import version",
  "        v = version('torchdoctor')",
  "    except Exception:",
  "        v = 'unknown'",
  "print(json.dumps({'executable': sys.executable, 'version': list(sys.version_info[:3]),",
  "    'torchdoctor': v, 'server': bool(v) and has('torchdoctor.lsp') and has('pygls'),",
  "    'pip': has('pip'), 'venv': sys.prefix != sys.base_prefix}))",
].join("\n");

export interface ProbeInfo {
  executable: string;
  version: [number, number, number];
  torchdoctor: string | null;
  server: boolean;
  pip: boolean;
  venv: boolean;
}

export type ProbeFailureKind =
  | "notFound"
  | "notExecutable"
  | "timeout"
  | "notPython"
  | "pythonTooOld"
  | "notInstalled"
  | "serverMissing";

export type ProbeResult =
  | { ok: true; info: ProbeInfo }
  | { ok: false; kind: ProbeFailureKind; detail: string; info?: ProbeInfo };

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Set when the process could not be started (`ENOENT`, `EACCES`, ...). */
  spawnError?: NodeJS.ErrnoException;
  timedOut: boolean;
}

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  onOutput?: (text: string) => void;
}

export function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    let settled = false;
    const finish = (result: Omit<RunResult, "stdout" | "stderr" | "timedOut">): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, stdout, stderr, timedOut });
    };
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
      windowsHide: true,
    });
    const timer = setTimeout(() => {
      // Do not wait for "close": a grandchild may hold the pipes open after the kill.
      timedOut = true;
      child.kill("SIGKILL");
      child.stdout.destroy();
      child.stderr.destroy();
      finish({ code: null });
    }, options.timeoutMs ?? 15_000);
    child.stdout.on("data", (chunk: Buffer) => {
      const text = chunk.toString();
      stdout += text;
      options.onOutput?.(text);
    });
    child.stderr.on("data", (chunk: Buffer) => {
      const text = chunk.toString();
      stderr += text;
      options.onOutput?.(text);
    });
    child.on("error", (err: NodeJS.ErrnoException) => { finish({ code: null, spawnError: err }); });
    child.on("close", (code) => { finish({ code }); });
  });
}

/** Classifies what the probe printed (pure; `probe` runs it). */
export function interpretProbe(result: RunResult): ProbeResult {
  if (result.spawnError !== undefined) {
    const code = result.spawnError.code;
    if (code === "ENOENT") return { ok: false, kind: "notFound", detail: result.spawnError.message };
    if (code === "EACCES") return { ok: false, kind: "notExecutable", detail: result.spawnError.message };
    return { ok: false, kind: "notPython", detail: result.spawnError.message };
  }
  if (result.timedOut) return { ok: false, kind: "timeout", detail: "the interpreter did not answer within the time limit" };
  const line = result.stdout.trim().split(/\r?\n/).pop() ?? "";
  let info: ProbeInfo | undefined;
  try {
    const parsed: unknown = JSON.parse(line);
    if (isProbeInfo(parsed)) info = parsed;
  } catch {
    info = undefined;
  }
  if (info === undefined) {
    const detail = (result.stderr.trim() || result.stdout.trim() || `exit code ${String(result.code)}`).slice(-2000);
    if (/SyntaxError|invalid syntax/.test(result.stderr)) {
      return { ok: false, kind: "pythonTooOld", detail };
    }
    return { ok: false, kind: "notPython", detail };
  }
  const [major, minor] = info.version;
  if (major < MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor < MIN_PYTHON[1])) {
    return { ok: false, kind: "pythonTooOld", detail: `Python ${info.version.join(".")}`, info };
  }
  if (info.torchdoctor === null) return { ok: false, kind: "notInstalled", detail: "No module named 'torchdoctor'", info };
  if (!info.server) {
    return { ok: false, kind: "serverMissing", detail: "torchdoctor's language server or its dependency pygls is missing", info };
  }
  return { ok: true, info };
}

function isProbeInfo(value: unknown): value is ProbeInfo {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.executable === "string" &&
    Array.isArray(v.version) &&
    v.version.length === 3 &&
    v.version.every((n) => typeof n === "number") &&
    (v.torchdoctor === null || typeof v.torchdoctor === "string") &&
    typeof v.server === "boolean" &&
    typeof v.pip === "boolean" &&
    typeof v.venv === "boolean"
  );
}

/**
 * Environment for every Python process the extension starts: the current directory is never put
 * on `sys.path` (PYTHONSAFEPATH, Python 3.11+; older ones run from `cwd`, which the caller sets to
 * a folder of the extension's own).
 */
export function pythonEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...base, PYTHONSAFEPATH: "1", PYTHONIOENCODING: "utf-8", PYTHONUNBUFFERED: "1" };
}

export async function probe(python: string, cwd: string, timeoutMs = 20_000): Promise<ProbeResult> {
  const result = await run(python, ["-c", PROBE_SCRIPT], { cwd, env: pythonEnv(), timeoutMs });
  return interpretProbe(result);
}

/** The arguments that start the language server. */
export function serverArgs(): string[] {
  return ["-m", "torchdoctor", "server"];
}

/** What to install: a wheel shipped with the extension when there is one, else the package index. */
export function installTarget(bundledWheels: readonly string[], bundledDir: string): string {
  const wheels = bundledWheels.filter((name) => /^torchdoctor-[^-]+-.*\.whl$/.test(name)).sort(compareWheelNames);
  const newest = wheels[wheels.length - 1];
  return newest !== undefined ? path.join(bundledDir, newest) : "torchdoctor";
}

function compareWheelNames(a: string, b: string): number {
  const va = (a.split("-")[1] ?? "").split(".").map((n) => parseInt(n, 10) || 0);
  const vb = (b.split("-")[1] ?? "").split(".").map((n) => parseInt(n, 10) || 0);
  for (let i = 0; i < Math.max(va.length, vb.length); i++) {
    const d = (va[i] ?? 0) - (vb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

export function pipInstallArgs(target: string): string[] {
  return ["-m", "pip", "install", "--upgrade", "--disable-pip-version-check", target];
}

export type InstallFailureKind = "externallyManaged" | "noPip" | "network" | "other";

/** Why `pip install` failed, from its output. */
export function classifyPipFailure(output: string): InstallFailureKind {
  if (/externally[- ]managed[- ]environment/i.test(output)) return "externallyManaged";
  if (/No module named pip/i.test(output)) return "noPip";
  if (/(Could not find a version|No matching distribution|Failed to establish a new connection|Temporary failure in name resolution|ConnectionError|Network is unreachable)/i.test(output)) {
    return "network";
  }
  return "other";
}

/** The interpreter inside a virtual environment folder. */
export function venvPython(venvDir: string, platform: NodeJS.Platform = process.platform): string {
  return platform === "win32" ? path.join(venvDir, "Scripts", "python.exe") : path.join(venvDir, "bin", "python");
}

export type LineLevel = "debug" | "info" | "warn" | "error";

/**
 * The output level of a line the server wrote to stderr. Python's logging lines start with their
 * level (`INFO torchdoctor.lsp: ...`); INFO goes to debug because the server sends the same text
 * as `window/logMessage`. Tracebacks and anything unrecognised are errors.
 */
export function stderrLevel(line: string): LineLevel {
  const m = /^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)[\s:]/.exec(line);
  switch (m?.[1]) {
    case "DEBUG":
    case "INFO":
      return "debug";
    case "WARNING":
    case "WARN":
      return "warn";
    default:
      return "error";
  }
}
