/**
 * Which Python runs the language server. No `vscode` import: the extension passes in what it
 * knows (the setting's values per scope, workspace trust, the Python extension's choice).
 *
 * Order: the `torchdoctor.interpreter` setting; the environment the Python extension selected
 * for the workspace; `python3` (then `python`) on PATH. In an untrusted workspace a path from
 * workspace settings is never run, and neither is any interpreter inside the workspace folders.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { t } from "./l10n";
import { interpreterSettingValue } from "./settings";

export type InterpreterSource = "setting" | "pythonExtension" | "path";

/** The setting's raw values per scope, as the settings files hold them (any JSON value). */
export interface InterpreterSetting {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

export interface ResolveInput {
  setting: InterpreterSetting;
  trusted: boolean;
  /** File-system paths of the workspace folders (the first one resolves `${workspaceFolder}`). */
  workspaceFolders: string[];
  /** The interpreter the Python extension selected for the workspace, if it is installed. */
  pythonExtension?: () => Promise<string | undefined>;
  /** Finds an executable on PATH; defaults to a search of `env.PATH`. */
  which?: (name: string) => Promise<string | undefined>;
  env?: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
}

export interface Resolved {
  ok: true;
  command: string;
  source: InterpreterSource;
  /** Things the user should know (for the output channel); `untrustedNotice` is shown once. */
  notes: string[];
  untrustedNotice?: string;
  /** What is wrong with values of the setting that were ignored (shown to the user). */
  settingProblems: string[];
}

export interface NotResolved {
  ok: false;
  notes: string[];
  untrustedNotice?: string;
  settingProblems: string[];
}

export type Resolution = Resolved | NotResolved;

export function describeSource(source: InterpreterSource): string {
  switch (source) {
    case "setting":
      return t("the torchdoctor.interpreter setting");
    case "pythonExtension":
      return t("the Python extension's selected environment");
    case "path":
      return t("PATH");
  }
}

/** Expands `~`, `${userHome}`, `${workspaceFolder}` and `${env:NAME}`; relative paths are taken from the workspace folder. */
export function expandPath(
  value: string,
  workspaceFolder: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  home: string = os.homedir(),
): string {
  let out = value.trim();
  out = out.replace(/\$\{userHome\}/g, home);
  out = out.replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => env[name] ?? "");
  if (workspaceFolder !== undefined) {
    out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  }
  if (out === "~" || out.startsWith("~/") || out.startsWith("~\\")) {
    out = path.join(home, out.slice(1));
  }
  const looksLikePath = out.includes("/") || out.includes("\\");
  if (looksLikePath && !path.isAbsolute(out) && workspaceFolder !== undefined) {
    out = path.resolve(workspaceFolder, out);
  }
  return out;
}

/** Whether `file` lies inside (or is) one of `folders`. */
export function isInside(file: string, folders: readonly string[]): boolean {
  const target = path.resolve(file);
  return folders.some((folder) => {
    const rel = path.relative(path.resolve(folder), target);
    return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
  });
}

export async function whichOnPath(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): Promise<string | undefined> {
  const dirs = (env.PATH ?? env.Path ?? "").split(path.delimiter).filter((d) => d !== "");
  const exts = platform === "win32" ? (env.PATHEXT ?? ".EXE;.CMD;.BAT").split(";") : [""];
  for (const dir of dirs) {
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      try {
        const stat = await fs.promises.stat(candidate);
        if (!stat.isFile()) continue;
        if (platform !== "win32") await fs.promises.access(candidate, fs.constants.X_OK);
        return candidate;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

export async function resolveInterpreter(input: ResolveInput): Promise<Resolution> {
  const env = input.env ?? process.env;
  const platform = input.platform ?? process.platform;
  const which = input.which ?? ((name: string) => whichOnPath(name, env, platform));
  const folder = input.workspaceFolders[0];
  const notes: string[] = [];
  let untrustedNotice: string | undefined;

  const settingProblems: string[] = [];
  const nonEmpty = (v: unknown, where: string): string | undefined => {
    const { value, problem } = interpreterSettingValue(v, where);
    if (problem !== undefined) {
      settingProblems.push(problem);
      notes.push(problem);
    }
    return value;
  };
  const workspaceValue =
    nonEmpty(input.setting.workspaceFolderValue, " (folder settings)") ??
    nonEmpty(input.setting.workspaceValue, " (workspace settings)");
  const userValue = nonEmpty(input.setting.globalValue, " (user settings)");

  // 1. The setting.
  let configured: string | undefined;
  if (workspaceValue !== undefined && input.trusted) {
    configured = workspaceValue;
  } else {
    if (workspaceValue !== undefined) {
      untrustedNotice =
        userValue !== undefined
          ? t(
              'This workspace is not trusted, so torchdoctor does not run the interpreter "{0}" from its settings; it uses your user-level torchdoctor.interpreter instead. Trust the workspace to use it.',
              workspaceValue,
            )
          : t(
              'This workspace is not trusted, so torchdoctor does not run the interpreter "{0}" from its settings; it uses the Python on PATH instead. Trust the workspace to use it.',
              workspaceValue,
            );
      notes.push(untrustedNotice);
    }
    configured = userValue;
  }
  if (configured !== undefined) {
    let command = expandPath(configured, folder, env);
    if (!command.includes("/") && !command.includes("\\")) {
      const found = await which(command);
      if (found === undefined) {
        notes.push(`torchdoctor.interpreter is "${configured}", which is not on PATH.`);
        return { ok: false, notes, ...(untrustedNotice !== undefined ? { untrustedNotice } : {}), settingProblems };
      }
      command = found;
    }
    if (!input.trusted && isInside(command, input.workspaceFolders)) {
      untrustedNotice = t(
        'This workspace is not trusted, so torchdoctor does not run "{0}", which lies inside it. Trust the workspace to use it.',
        command,
      );
      notes.push(untrustedNotice);
    } else {
      return { ok: true, command, source: "setting", notes, ...(untrustedNotice !== undefined ? { untrustedNotice } : {}), settingProblems };
    }
  }

  // 2. The Python extension.
  if (input.pythonExtension !== undefined) {
    let fromExtension: string | undefined;
    try {
      fromExtension = await input.pythonExtension();
    } catch (err) {
      notes.push(`The Python extension did not answer: ${errorText(err)}`);
    }
    if (fromExtension !== undefined && fromExtension.trim() !== "") {
      if (!input.trusted && isInside(fromExtension, input.workspaceFolders)) {
        notes.push(
          `Not using the Python extension's interpreter "${fromExtension}": it lies inside an untrusted workspace.`,
        );
      } else {
        return { ok: true, command: fromExtension, source: "pythonExtension", notes, ...(untrustedNotice !== undefined ? { untrustedNotice } : {}), settingProblems };
      }
    }
  }

  // 3. PATH.
  const names = platform === "win32" ? ["python", "py"] : ["python3", "python"];
  for (const name of names) {
    const found = await which(name);
    if (found !== undefined && (input.trusted || !isInside(found, input.workspaceFolders))) {
      return { ok: true, command: found, source: "path", notes, ...(untrustedNotice !== undefined ? { untrustedNotice } : {}), settingProblems };
    }
  }
  notes.push(`No Python interpreter found: set torchdoctor.interpreter, or put ${names[0]} on PATH.`);
  return { ok: false, notes, ...(untrustedNotice !== undefined ? { untrustedNotice } : {}), settingProblems };
}

export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/**
 * Reads a JSON-with-comments settings file (`.vscode/settings.json`, `*.code-workspace`):
 * comments and trailing commas are dropped. Returns `undefined` when it cannot be parsed.
 */
export function parseJsonc(text: string): unknown {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text.charAt(i);
    const next = text.charAt(i + 1);
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === "/" && next === "/") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === "/" && next === "*") {
      const end = text.indexOf("*/", i + 2);
      i = end < 0 ? text.length : end + 2;
    } else {
      out += c;
      i++;
    }
  }
  try {
    return JSON.parse(out.replace(/,(\s*[}\]])/g, "$1"));
  } catch {
    return undefined;
  }
}

/**
 * The `torchdoctor.interpreter` a workspace's own settings files set, read as data (never run).
 * VS Code hides restricted settings of untrusted workspaces from the configuration API; this
 * lets the user be told that the value was ignored.
 */
export function workspaceInterpreterSetting(files: readonly string[]): string | undefined {
  for (const file of files) {
    let text: string;
    try {
      text = fs.readFileSync(file, "utf8");
    } catch {
      continue;
    }
    const parsed = parseJsonc(text);
    if (typeof parsed !== "object" || parsed === null) continue;
    const record = parsed as Record<string, unknown>;
    const settings = file.endsWith(".code-workspace") ? record.settings : record;
    if (typeof settings !== "object" || settings === null) continue;
    const { value } = interpreterSettingValue((settings as Record<string, unknown>)["torchdoctor.interpreter"]);
    if (value !== undefined) return value;
  }
  return undefined;
}
