/**
 * What the user is told when the server cannot start, and which actions the message offers.
 * No `vscode` import.
 */
import { t } from "./l10n";
import type { ProbeFailureKind } from "./python";

export type Action = "install" | "selectInterpreter" | "showOutput" | "openSettings" | "restart";

export const ACTION_TITLES: Record<Action, string> = {
  install: "Install torchdoctor",
  selectInterpreter: "Select Interpreter",
  showOutput: "Show Output",
  openSettings: "Open Settings",
  restart: "Restart Server",
};

/** An action's button title, in the user's language. */
export function actionTitle(action: Action): string {
  return t(ACTION_TITLES[action]);
}

export interface UserMessage {
  severity: "error" | "warning" | "info";
  text: string;
  actions: Action[];
}

export function probeFailureMessage(kind: ProbeFailureKind, python: string, detail: string): UserMessage {
  switch (kind) {
    case "notInstalled":
      return {
        severity: "warning",
        text: t("torchdoctor is not installed in {0}. Install it there to get PyTorch diagnostics?", python),
        actions: ["install", "selectInterpreter"],
      };
    case "serverMissing":
      return {
        severity: "warning",
        text: t("The torchdoctor in {0} cannot run its language server ({1}). Reinstall it there?", python, detail),
        actions: ["install", "selectInterpreter", "showOutput"],
      };
    case "pythonTooOld":
      return {
        severity: "error",
        text: t("torchdoctor needs Python 3.10 or newer, but {0} is {1}. Choose a newer interpreter.", python, detail),
        actions: ["selectInterpreter", "openSettings"],
      };
    case "notFound":
      return {
        severity: "error",
        text: t("torchdoctor cannot find the Python interpreter {0}. Check torchdoctor.interpreter or choose another interpreter.", python),
        actions: ["selectInterpreter", "openSettings"],
      };
    case "notExecutable":
      return {
        severity: "error",
        text: t("torchdoctor cannot run {0}: permission denied. Choose another interpreter.", python),
        actions: ["selectInterpreter", "openSettings"],
      };
    case "timeout":
      return {
        severity: "error",
        text: t("{0} did not answer in time, so torchdoctor's server was not started.", python),
        actions: ["restart", "showOutput"],
      };
    case "notPython":
      return {
        severity: "error",
        text: t("{0} does not look like a working Python interpreter. Choose another one.", python),
        actions: ["selectInterpreter", "showOutput"],
      };
  }
}

export function noInterpreterMessage(): UserMessage {
  return {
    severity: "error",
    text: t("torchdoctor found no Python interpreter. Install Python 3.10+ or set torchdoctor.interpreter."),
    actions: ["openSettings", "showOutput"],
  };
}

/** A setting whose value is ignored: `problem` says which and why (in English, as the log). */
export function settingProblemMessage(problem: string): UserMessage {
  return {
    severity: "warning",
    text: t("A torchdoctor setting is ignored: {0}", problem),
    actions: ["openSettings", "showOutput"],
  };
}

export function crashedMessage(): UserMessage {
  return {
    severity: "error",
    text: t("torchdoctor's language server stopped repeatedly and will not be restarted automatically."),
    actions: ["showOutput", "restart"],
  };
}

/**
 * Decides whether a server that stopped is started again: at most `maxRestarts` times within
 * `windowMs`; past that, it stays stopped until the user restarts it.
 */
export class CrashTracker {
  private readonly crashes: number[] = [];

  constructor(
    private readonly maxRestarts = 4,
    private readonly windowMs = 3 * 60_000,
  ) {}

  record(now: number): "restart" | "giveUp" {
    this.crashes.push(now);
    while (this.crashes.length > 0 && now - (this.crashes[0] ?? now) > this.windowMs) this.crashes.shift();
    return this.crashes.length > this.maxRestarts ? "giveUp" : "restart";
  }

  reset(): void {
    this.crashes.length = 0;
  }
}
