import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  classifyPipFailure,
  installTarget,
  interpretProbe,
  pipInstallArgs,
  probe,
  pythonEnv,
  run,
  serverArgs,
  stderrLevel,
  venvPython,
  type RunResult,
} from "../../src/python";

// The repository's virtual environment (torchdoctor installed), as .ci/run creates it.
const REPO_PYTHON = process.env.TORCHDOCTOR_PYTHON ?? path.resolve(__dirname, "..", "..", "..", ".venv", "bin", "python");
const haveRepoPython = fs.existsSync(REPO_PYTHON);

let scratch: string;
beforeAll(() => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), "td-python-"));
});
afterAll(() => { fs.rmSync(scratch, { recursive: true, force: true }); });

function script(name: string, body: string): string {
  const file = path.join(scratch, name);
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`);
  fs.chmodSync(file, 0o755);
  return file;
}

const result = (overrides: Partial<RunResult>): RunResult => ({ code: 0, stdout: "", stderr: "", timedOut: false, ...overrides });
const info = (overrides: Record<string, unknown> = {}) =>
  JSON.stringify({ executable: "/p/bin/python", version: [3, 11, 2], torchdoctor: "0.1.0", server: true, pip: true, venv: true, ...overrides });

describe("probe (real processes)", () => {
  it.runIf(haveRepoPython)("accepts the repository's interpreter, where torchdoctor and its server are installed", async () => {
    const r = await probe(REPO_PYTHON, scratch);
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(r.info.torchdoctor).toMatch(/^\d+\.\d+/);
      expect(r.info.server).toBe(true);
      expect(r.info.version[0]).toBe(3);
    }
  });

  it("reports an interpreter without torchdoctor as not installed", async () => {
    // A Python whose import system cannot see torchdoctor: isolated mode, empty path.
    const bare = script("bare-python", `exec ${JSON.stringify(haveRepoPython ? REPO_PYTHON : "python3")} -I -S "$@"`);
    const r = await probe(bare, scratch);
    expect(r).toMatchObject({ ok: false, kind: "notInstalled" });
  });

  it("reports a missing interpreter", async () => {
    const r = await probe(path.join(scratch, "no-such-python"), scratch);
    expect(r).toMatchObject({ ok: false, kind: "notFound" });
  });

  it("reports a program that is not Python", async () => {
    const r = await probe(script("not-python", "echo 'hello'; exit 3"), scratch);
    expect(r).toMatchObject({ ok: false, kind: "notPython" });
  });

  it("gives up on an interpreter that hangs", async () => {
    const r = await probe(script("hangs", "sleep 30"), scratch, 300);
    expect(r).toMatchObject({ ok: false, kind: "timeout" });
  });

  it("never lets the current folder shadow torchdoctor", async () => {
    // A folder with its own `torchdoctor` package, used as the working directory.
    const trap = path.join(scratch, "trap", "torchdoctor");
    fs.mkdirSync(trap, { recursive: true });
    fs.writeFileSync(path.join(trap, "__init__.py"), "raise SystemExit('imported from the working directory')\n");
    const bare = script("bare-python-2", `exec ${JSON.stringify(haveRepoPython ? REPO_PYTHON : "python3")} -S "$@"`);
    const r = await run(bare, ["-c", "import torchdoctor"], { cwd: path.dirname(trap), env: pythonEnv() });
    expect(r.stderr + r.stdout).not.toContain("imported from the working directory");
  });

  it.runIf(haveRepoPython)("starts the server with no module of its working folder imported", async () => {
    // Modules a cloned repository may hold: each leaves a mark when imported.
    const work = path.join(scratch, "planted");
    const marks = path.join(scratch, "marks");
    fs.mkdirSync(work, { recursive: true });
    fs.mkdirSync(marks, { recursive: true });
    const names = ["json", "argparse", "ast", "dataclasses", "typing", "typing_extensions", "pygls", "lsprotocol", "libcst", "jedi", "runpy", "importlib", "encodings", "sitecustomize", "torchdoctor"];
    for (const name of names) {
      const pkg = path.join(work, name);
      fs.mkdirSync(pkg, { recursive: true });
      fs.writeFileSync(path.join(pkg, "__init__.py"), `open(${JSON.stringify(path.join(marks, name))}, "w").close()\n`);
    }
    // stdin is closed: the server starts, imports all it needs, reads the end of input and exits.
    const r = await run(REPO_PYTHON, serverArgs(), { cwd: work, env: pythonEnv(), timeoutMs: 60_000 });
    expect(r.timedOut).toBe(false);
    expect(fs.readdirSync(marks)).toEqual([]);
  });
});

describe("interpretProbe", () => {
  it("accepts a complete installation", () => {
    expect(interpretProbe(result({ stdout: info() + "\n" }))).toMatchObject({ ok: true, info: { torchdoctor: "0.1.0" } });
  });
  it("reads the last line, after anything a sitecustomize printed", () => {
    expect(interpretProbe(result({ stdout: "welcome!\n" + info() }))).toMatchObject({ ok: true });
  });
  it("tells a missing package from a missing server", () => {
    expect(interpretProbe(result({ stdout: info({ torchdoctor: null, server: false }) }))).toMatchObject({ ok: false, kind: "notInstalled" });
    expect(interpretProbe(result({ stdout: info({ server: false }) }))).toMatchObject({ ok: false, kind: "serverMissing" });
  });
  it("rejects Pythons older than 3.10", () => {
    expect(interpretProbe(result({ stdout: info({ version: [3, 9, 18] }) }))).toMatchObject({ ok: false, kind: "pythonTooOld", detail: "Python 3.9.18" });
    expect(interpretProbe(result({ code: 1, stderr: "SyntaxError: invalid syntax" }))).toMatchObject({ ok: false, kind: "pythonTooOld" });
  });
  it("maps spawn errors", () => {
    const err = (code: string) => Object.assign(new Error(code), { code });
    expect(interpretProbe(result({ code: null, spawnError: err("ENOENT") }))).toMatchObject({ kind: "notFound" });
    expect(interpretProbe(result({ code: null, spawnError: err("EACCES") }))).toMatchObject({ kind: "notExecutable" });
  });
  it("treats malformed output as not Python, keeping the error text", () => {
    const r = interpretProbe(result({ code: 1, stdout: "{}", stderr: "boom" }));
    expect(r).toMatchObject({ ok: false, kind: "notPython", detail: "boom" });
  });
});

describe("installing", () => {
  it("prefers the newest bundled wheel, else the package index", () => {
    const dir = "/ext/bundled";
    expect(installTarget([], dir)).toBe("torchdoctor");
    expect(installTarget(["README.md"], dir)).toBe("torchdoctor");
    expect(installTarget(["torchdoctor-0.9.0-py3-none-any.whl", "torchdoctor-0.10.0-py3-none-any.whl"], dir)).toBe(
      path.join(dir, "torchdoctor-0.10.0-py3-none-any.whl"),
    );
  });
  it("runs pip as a module of the chosen interpreter", () => {
    expect(pipInstallArgs("torchdoctor")).toEqual(["-m", "pip", "install", "--upgrade", "--disable-pip-version-check", "torchdoctor"]);
  });
  it("recognises why pip failed", () => {
    expect(classifyPipFailure("error: externally-managed-environment\n× This environment is externally managed")).toBe("externallyManaged");
    expect(classifyPipFailure("/usr/bin/python3: No module named pip")).toBe("noPip");
    expect(classifyPipFailure("ERROR: No matching distribution found for torchdoctor")).toBe("network");
    expect(classifyPipFailure("ERROR: Could not build wheels")).toBe("other");
  });
  it("finds the interpreter of a virtual environment", () => {
    expect(venvPython("/s/env", "linux")).toBe("/s/env/bin/python");
    expect(venvPython("C:\\s\\env", "win32")).toMatch(/Scripts[\\/]python\.exe$/);
  });
});

describe("stderrLevel", () => {
  it("maps Python logging lines to output levels", () => {
    expect(stderrLevel("INFO torchdoctor.lsp: torchdoctor 0.1.0 ready")).toBe("debug");
    expect(stderrLevel("DEBUG:pygls:sending")).toBe("debug");
    expect(stderrLevel("WARNING pygls.protocol.json_rpc: Cancel notification for unknown message id")).toBe("warn");
    expect(stderrLevel("ERROR torchdoctor.lsp: analysis failed")).toBe("error");
  });
  it("treats tracebacks and anything else as errors", () => {
    expect(stderrLevel("Traceback (most recent call last):")).toBe("error");
    expect(stderrLevel("  File \"x.py\", line 1")).toBe("error");
    expect(stderrLevel("INFORMATION")).toBe("error");
  });
});
