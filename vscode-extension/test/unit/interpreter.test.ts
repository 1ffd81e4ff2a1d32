import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  expandPath,
  isInside,
  parseJsonc,
  resolveInterpreter,
  whichOnPath,
  workspaceInterpreterSetting,
  type ResolveInput,
} from "../../src/interpreter";

let root: string;
let binDir: string;
let workspace: string;
let wsPython: string;

function executable(file: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, "#!/bin/sh\nexit 0\n");
  fs.chmodSync(file, 0o755);
  return file;
}

beforeAll(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "td-interp-"));
  binDir = path.join(root, "bin");
  workspace = path.join(root, "project");
  executable(path.join(binDir, "python3"));
  executable(path.join(binDir, "python3.12"));
  fs.writeFileSync(path.join(binDir, "python"), "not executable");
  wsPython = executable(path.join(workspace, ".venv", "bin", "python"));
});

afterAll(() => { fs.rmSync(root, { recursive: true, force: true }); });

function input(overrides: Partial<ResolveInput>): ResolveInput {
  return {
    setting: {},
    trusted: true,
    workspaceFolders: [workspace],
    env: { PATH: binDir },
    platform: "linux",
    ...overrides,
  };
}

describe("resolveInterpreter", () => {
  it("prefers the torchdoctor.interpreter setting, folder over workspace over user", async () => {
    const r = await resolveInterpreter(
      input({
        setting: { globalValue: "/usr/bin/python3", workspaceValue: "/opt/ws/python", workspaceFolderValue: "${workspaceFolder}/.venv/bin/python" },
        pythonExtension: async () => "/from/python/extension",
      }),
    );
    expect(r).toMatchObject({ ok: true, command: wsPython, source: "setting" });
    const user = await resolveInterpreter(input({ setting: { globalValue: "/usr/bin/python3" } }));
    expect(user).toMatchObject({ ok: true, command: "/usr/bin/python3", source: "setting" });
  });

  it("takes a list of one path, as Ruff's ruff.interpreter, and says what is wrong with other types", async () => {
    const listed = await resolveInterpreter(input({ setting: { workspaceValue: ["${workspaceFolder}/.venv/bin/python"] } }));
    expect(listed).toMatchObject({ ok: true, command: wsPython, source: "setting", settingProblems: [] });

    const two = await resolveInterpreter(input({ setting: { globalValue: ["/a/python", "/b/python"] } }));
    expect(two).toMatchObject({ ok: true, command: path.join(binDir, "python3"), source: "path" });
    expect(two.settingProblems).toEqual([
      "torchdoctor.interpreter (user settings) must be one path (a string, or a list of one string); it is a list of 2 entries, so it is ignored.",
    ]);

    const wrong = await resolveInterpreter(
      input({ setting: { workspaceFolderValue: { path: "/x" }, workspaceValue: [3], globalValue: "/usr/bin/python3" } }),
    );
    expect(wrong).toMatchObject({ ok: true, command: "/usr/bin/python3", source: "setting" });
    expect(wrong.settingProblems).toEqual([
      'torchdoctor.interpreter (folder settings) must be a path to a Python executable (a string), not an object ({"path":"/x"}); it is ignored.',
      "torchdoctor.interpreter (workspace settings) must be a path to a Python executable (a string), not a list ([3]); it is ignored.",
    ]);
    expect(wrong.notes).toEqual(expect.arrayContaining(wrong.settingProblems));
  });

  it("takes the Python extension's interpreter when the setting is empty", async () => {
    const r = await resolveInterpreter(input({ setting: { globalValue: "  " }, pythonExtension: async () => "/envs/torch/bin/python" }));
    expect(r).toMatchObject({ ok: true, command: "/envs/torch/bin/python", source: "pythonExtension" });
  });

  it("falls back to python3 on PATH, skipping files that are not executable", async () => {
    const r = await resolveInterpreter(input({ pythonExtension: async () => undefined }));
    expect(r).toMatchObject({ ok: true, command: path.join(binDir, "python3"), source: "path" });
  });

  it("carries on to PATH when the Python extension fails", async () => {
    const r = await resolveInterpreter(
      input({
        pythonExtension: async () => {
          throw new Error("API not ready");
        },
      }),
    );
    expect(r).toMatchObject({ ok: true, source: "path" });
    expect(r.notes.join("\n")).toContain("API not ready");
  });

  it("looks a bare command name up on PATH", async () => {
    const r = await resolveInterpreter(input({ setting: { globalValue: "python3.12" } }));
    expect(r).toMatchObject({ ok: true, command: path.join(binDir, "python3.12"), source: "setting" });
    const missing = await resolveInterpreter(input({ setting: { globalValue: "python9" } }));
    expect(missing.ok).toBe(false);
    expect(missing.notes.join("\n")).toContain('"python9", which is not on PATH');
  });

  it("reports that no interpreter exists", async () => {
    const r = await resolveInterpreter(input({ env: { PATH: path.join(root, "nothing-here") } }));
    expect(r.ok).toBe(false);
    expect(r.notes.join("\n")).toContain("No Python interpreter found");
  });

  describe("in an untrusted workspace", () => {
    it("never runs an interpreter from workspace settings, and says so", async () => {
      const r = await resolveInterpreter(
        input({ trusted: false, setting: { workspaceValue: "/tmp/evil/python", globalValue: "/usr/bin/python3" } }),
      );
      expect(r).toMatchObject({ ok: true, command: "/usr/bin/python3", source: "setting" });
      expect(r.untrustedNotice).toContain('"/tmp/evil/python"');
      expect(r.untrustedNotice).toContain("user-level torchdoctor.interpreter");
    });

    it("uses the Python on PATH when only the workspace sets an interpreter", async () => {
      const r = await resolveInterpreter(input({ trusted: false, setting: { workspaceFolderValue: "./.venv/bin/python" } }));
      expect(r).toMatchObject({ ok: true, command: path.join(binDir, "python3"), source: "path" });
      expect(r.untrustedNotice).toContain("the Python on PATH");
    });

    it("refuses interpreters inside the workspace, even from user settings or the Python extension", async () => {
      const r = await resolveInterpreter(
        input({
          trusted: false,
          setting: { globalValue: "${workspaceFolder}/.venv/bin/python" },
          pythonExtension: async () => wsPython,
        }),
      );
      expect(r).toMatchObject({ ok: true, command: path.join(binDir, "python3"), source: "path" });
      expect(r.untrustedNotice).toContain("lies inside it");
      expect(r.notes.join("\n")).toContain("inside an untrusted workspace");
    });

    it("skips a python3 on PATH that lies inside the workspace", async () => {
      const r = await resolveInterpreter(input({ trusted: false, env: { PATH: path.join(workspace, ".venv", "bin") } }));
      expect(r.ok).toBe(false);
    });
  });
});

describe("expandPath", () => {
  const env = { VENVS: "/srv/venvs" };
  it("expands variables, ~ and relative paths", () => {
    expect(expandPath("${workspaceFolder}/.venv/bin/python", "/w", env, "/home/u")).toBe("/w/.venv/bin/python");
    expect(expandPath("${env:VENVS}/t/bin/python", "/w", env, "/home/u")).toBe("/srv/venvs/t/bin/python");
    expect(expandPath("~/py/bin/python", "/w", env, "/home/u")).toBe("/home/u/py/bin/python");
    expect(expandPath("${userHome}/py", "/w", env, "/home/u")).toBe("/home/u/py");
    expect(expandPath(".venv/bin/python", "/w", env, "/home/u")).toBe("/w/.venv/bin/python");
    expect(expandPath("python3", "/w", env, "/home/u")).toBe("python3");
  });
});

describe("isInside", () => {
  it("compares whole path components", () => {
    expect(isInside("/w/a/python", ["/w"])).toBe(true);
    expect(isInside("/w", ["/w"])).toBe(true);
    expect(isInside("/work/python", ["/w"])).toBe(false);
    expect(isInside("/w/../etc/python", ["/w"])).toBe(false);
  });
});

describe("whichOnPath", () => {
  it("finds executables in PATH order", async () => {
    const second = path.join(root, "second");
    executable(path.join(second, "python3"));
    expect(await whichOnPath("python3", { PATH: `${second}${path.delimiter}${binDir}` }, "linux")).toBe(path.join(second, "python3"));
    expect(await whichOnPath("python", { PATH: binDir }, "linux")).toBeUndefined();
  });
});

describe("reading a workspace's interpreter setting as data", () => {
  it("parses JSON with comments and trailing commas", () => {
    const text = '{\n  // the venv\n  "torchdoctor.interpreter": "./venv/bin/python", /* keep */\n  "a": "http://x//y",\n}\n';
    expect(parseJsonc(text)).toEqual({ "torchdoctor.interpreter": "./venv/bin/python", a: "http://x//y" });
    expect(parseJsonc("{ nope")).toBeUndefined();
  });

  it("finds the setting in .vscode/settings.json or a .code-workspace file", () => {
    const settings = path.join(root, "settings.json");
    const wsFile = path.join(root, "project.code-workspace");
    fs.writeFileSync(settings, '{ "editor.tabSize": 2 }');
    fs.writeFileSync(wsFile, '{ "folders": [], "settings": { "torchdoctor.interpreter": "/w/bin/python" } }');
    expect(workspaceInterpreterSetting([path.join(root, "missing.json"), settings, wsFile])).toBe("/w/bin/python");
    expect(workspaceInterpreterSetting([settings])).toBeUndefined();
    fs.writeFileSync(settings, '{ "torchdoctor.interpreter": ["/l/bin/python"] }');
    expect(workspaceInterpreterSetting([settings])).toBe("/l/bin/python");
  });
});
