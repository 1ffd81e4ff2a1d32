// Shared helpers of the scripts that run VS Code (the server code-server bundles) under test.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

export const EXT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const REPO = path.resolve(EXT_DIR, "..");

export const PYTHON = process.env.TORCHDOCTOR_PYTHON || path.join(REPO, ".venv", "bin", "python");
export const CODE_SERVER =
  process.env.CODE_SERVER_DIR || path.join(EXT_DIR, ".tools", "code-server", "node_modules", "code-server");
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
];

export function requireFile(file, what) {
  if (!fs.existsSync(file)) {
    console.error(`missing ${what}: ${file}`);
    process.exit(2);
  }
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A fresh scratch folder under .test-run/. */
export function scratch(name) {
  const dir = path.join(EXT_DIR, ".test-run", name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** The test workspace: the fixtures, the repository's example scripts, and the interpreter setting. */
export function makeWorkspace(dir, extraSettings = {}) {
  fs.cpSync(path.join(EXT_DIR, "src", "test", "fixtures", "workspace"), dir, { recursive: true });
  const examples = path.join(REPO, "examples");
  if (fs.existsSync(examples)) {
    fs.mkdirSync(path.join(dir, "examples"), { recursive: true });
    for (const name of fs.readdirSync(examples).filter((n) => n.endsWith(".py"))) {
      fs.copyFileSync(path.join(examples, name), path.join(dir, "examples", name));
    }
  }
  fs.mkdirSync(path.join(dir, ".vscode"), { recursive: true });
  const settings = { "torchdoctor.interpreter": PYTHON, "torchdoctor.logLevel": "debug", ...extraSettings };
  fs.writeFileSync(path.join(dir, ".vscode", "settings.json"), JSON.stringify(settings, null, 2) + "\n");
  return dir;
}

/** Settings for every VS Code profile in `userDataDir`: quiet, offline, trusting the test folder. */
export function writeUserSettings(userDataDir, extra = {}) {
  const settings = {
    "security.workspace.trust.enabled": false,
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "update.mode": "none",
    "telemetry.telemetryLevel": "off",
    "chat.disableAIFeatures": true,
    "window.commandCenter": false,
    "editor.hover.delay": 300,
    "notebook.output.textLineLimit": 10,
    "git.enabled": false,
    "git.openRepositoryInParentFolders": "never",
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "workbench.layoutControl.enabled": false,
    "editor.minimap.enabled": false,
    ...extra,
  };
  for (const sub of ["User", path.join("data", "User"), path.join("data", "Machine")]) {
    fs.mkdirSync(path.join(userDataDir, sub), { recursive: true });
    fs.writeFileSync(path.join(userDataDir, sub, "settings.json"), JSON.stringify(settings, null, 2) + "\n");
  }
}

/** Starts a process, logs its output to `logFile`, resolves once a line matches `ready`. */
export function startProcess(command, args, { env, logFile, ready, timeoutMs = 60_000 }) {
  const log = fs.createWriteStream(logFile);
  const child = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`${path.basename(command)} did not start; see ${logFile}`)), timeoutMs);
    const onData = (chunk) => {
      log.write(chunk);
      if (seen !== null) {
        seen += chunk.toString();
        if (ready.test(seen)) {
          seen = null;
          clearTimeout(timer);
          resolve(child);
        }
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${path.basename(command)} exited with ${code}; see ${logFile}`));
    });
  });
}

export function stopProcess(child) {
  if (child && child.exitCode === null) {
    child.removeAllListeners("exit");
    child.kill("SIGTERM");
  }
}
