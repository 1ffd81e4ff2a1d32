import { describe, expect, it } from "vitest";
import { ACTION_TITLES, CrashTracker, probeFailureMessage } from "../../src/messages";
import type { ProbeFailureKind } from "../../src/python";
import { interpreterLabel, statusView } from "../../src/status";

describe("probeFailureMessage", () => {
  it("offers to install torchdoctor into the interpreter that lacks it", () => {
    const m = probeFailureMessage("notInstalled", "/usr/bin/python3", "No module named 'torchdoctor'");
    expect(m.text).toContain("/usr/bin/python3");
    expect(m.actions[0]).toBe("install");
    expect(ACTION_TITLES[m.actions[0] ?? "install"]).toBe("Install torchdoctor");
  });

  it("never offers to install into something that is not a usable Python", () => {
    const kinds: ProbeFailureKind[] = ["notFound", "notExecutable", "notPython", "pythonTooOld", "timeout"];
    for (const kind of kinds) {
      const m = probeFailureMessage(kind, "/x/python", "detail");
      expect(m.actions).not.toContain("install");
      expect(m.severity).toBe("error");
      expect(m.text).toContain("/x/python");
    }
  });
});

describe("CrashTracker", () => {
  it("restarts a few times, then gives up until reset", () => {
    const t = new CrashTracker(2, 1000);
    expect(t.record(0)).toBe("restart");
    expect(t.record(10)).toBe("restart");
    expect(t.record(20)).toBe("giveUp");
    t.reset();
    expect(t.record(30)).toBe("restart");
  });
  it("forgets crashes older than the window", () => {
    const t = new CrashTracker(1, 1000);
    expect(t.record(0)).toBe("restart");
    expect(t.record(5000)).toBe("restart");
  });
});

describe("status bar", () => {
  it("names the interpreter briefly", () => {
    expect(interpreterLabel("/work/proj/.venv/bin/python", [3, 11, 2], true)).toBe("3.11 (.venv)");
    expect(interpreterLabel("/usr/bin/python3", [3, 12, 0])).toBe("3.12 (python3)");
    expect(interpreterLabel(undefined)).toBe("no Python");
  });
  it("shows state and interpreter, with the full path in the tooltip", () => {
    const v = statusView({ state: "running", python: "/p/.venv/bin/python", pythonVersion: [3, 11, 2], isVenv: true, source: "setting", torchdoctorVersion: "0.1.0" });
    expect(v.text).toBe("$(check) torchdoctor · 3.11 (.venv)");
    expect(v.tooltip).toContain("torchdoctor: running");
    expect(v.tooltip).toContain("Interpreter: /p/.venv/bin/python (from the torchdoctor.interpreter setting)");
    expect(v.severity).toBe("ok");
  });
  it("marks a missing installation and failures", () => {
    expect(statusView({ state: "notInstalled", python: "/usr/bin/python3" }).severity).toBe("warning");
    expect(statusView({ state: "error" }).text).toBe("$(error) torchdoctor");
  });
});
