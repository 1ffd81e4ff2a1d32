/** The status bar item's text and tooltip, computed without `vscode`. */
import * as path from "node:path";
import { describeSource, type InterpreterSource } from "./interpreter";
import { t } from "./l10n";

export type ServerState = "starting" | "running" | "stopped" | "disabled" | "notInstalled" | "error";

export interface StatusInput {
  state: ServerState;
  python?: string | undefined;
  pythonVersion?: readonly number[] | undefined;
  isVenv?: boolean | undefined;
  source?: InterpreterSource | undefined;
  torchdoctorVersion?: string | null | undefined;
  detail?: string | undefined;
}

export interface StatusView {
  text: string;
  tooltip: string;
  severity: "ok" | "warning" | "error";
}

const ICONS: Record<ServerState, string> = {
  starting: "$(sync~spin)",
  running: "$(check)",
  stopped: "$(circle-slash)",
  disabled: "$(circle-slash)",
  notInstalled: "$(warning)",
  error: "$(error)",
};

/** State names, as templates for `t`. */
export const STATE_WORDS: Record<ServerState, string> = {
  starting: "starting",
  running: "running",
  stopped: "stopped",
  disabled: "disabled (torchdoctor.enable is off)",
  notInstalled: "torchdoctor is not installed in this interpreter",
  error: "failed to start",
};

/** A short label for an interpreter: `3.11 (.venv)` for a virtual environment, else `3.11 (python3)`. */
export function interpreterLabel(python: string | undefined, version?: readonly number[], isVenv = false): string {
  if (python === undefined) return "no Python";
  const v = version !== undefined && version.length >= 2 ? `${version[0] ?? ""}.${version[1] ?? ""}` : "";
  const parts = python.split(/[\\/]/);
  const binIndex = parts.length - 2;
  const envName =
    isVenv && binIndex > 0 && /^(bin|Scripts)$/.test(parts[binIndex] ?? "") ? parts[binIndex - 1] : undefined;
  const name = envName ?? path.basename(python);
  return v !== "" ? `${v} (${name})` : name;
}

export function statusView(input: StatusInput): StatusView {
  const label = interpreterLabel(input.python, input.pythonVersion, input.isVenv ?? false);
  const text = `${ICONS[input.state]} torchdoctor` + (input.python !== undefined ? ` · ${label}` : "");
  const lines = [`torchdoctor: ${t(STATE_WORDS[input.state])}`];
  if (input.python !== undefined) {
    lines.push(
      input.source !== undefined
        ? t("Interpreter: {0} (from {1})", input.python, describeSource(input.source))
        : t("Interpreter: {0}", input.python),
    );
  }
  if (input.torchdoctorVersion) lines.push(`torchdoctor ${input.torchdoctorVersion}`);
  if (input.detail) lines.push(input.detail);
  lines.push(t("Click to show the output."));
  const severity = input.state === "error" ? "error" : input.state === "notInstalled" ? "warning" : "ok";
  return { text, tooltip: lines.join("\n"), severity };
}
