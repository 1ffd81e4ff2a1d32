/**
 * What the user is told when the server cannot start, and which actions the message offers.
 * No `vscode` import.
 */
import type { ProbeFailureKind } from "./python";

export type Action = "install" | "selectInterpreter" | "showOutput" | "openSettings" | "restart";

export const ACTION_TITLES: Record<Action, string> = {
  install: "Install torchdoctor",
  selectInterpreter: "Select Interpreter",
  showOutput: "Show Output",
  openSettings: "Open Settings",
  restart: "Restart Server",
};

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
        text: `torchdoctor is not installed in ${python}. Install it there to get PyTorch diagnostics?`,
        actions: ["install", "selectInterpreter"],
      };
    case "serverMissing":
      return {
        severity: "warning",
        text: `The torchdoctor in ${python} cannot run its language server (${detail}). Reinstall it there?`,
        actions: ["install", "selectInterpreter", "showOutput"],
      };
    case "pythonTooOld":
      return {
        severity: "error",
        text: `torchdoctor needs Python 3.10 or newer, but ${python} is ${detail}. Choose a newer interpreter.`,
        actions: ["selectInterpreter", "openSettings"],
      };
    case "notFound":
      return {
        severity: "error",
        text: `torchdoctor cannot find the Python interpreter ${python}. Check torchdoctor.interpreter or choose another interpreter.`,
        actions: ["selectInterpreter", "openSettings"],
      };
    case "notExecutable":
      return {
        severity: "error",
        text: `torchdoctor cannot run ${python}: permission denied. Choose another interpreter.`,
        actions: ["selectInterpreter", "openSettings"],
      };
    case "timeout":
      return {
        severity: "error",
        text: `${python} did not answer in time, so torchdoctor's server was not started.`,
        actions: ["restart", "showOutput"],
      };
    case "notPython":
      return {
        severity: "error",
        text: `${python} does not look like a working Python interpreter. Choose another one.`,
        actions: ["selectInterpreter", "showOutput"],
      };
  }
}

export function noInterpreterMessage(): UserMessage {
  return {
    severity: "error",
    text: "torchdoctor found no Python interpreter. Install Python 3.10+ or set torchdoctor.interpreter.",
    actions: ["openSettings", "showOutput"],
  };
}

export function crashedMessage(): UserMessage {
  return {
    severity: "error",
    text: "torchdoctor's language server stopped repeatedly and will not be restarted automatically.",
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
