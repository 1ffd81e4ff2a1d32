// Runs the mocha suites of src/test inside a real VS Code: the VS Code server that code-server
// bundles, started with the smoke-test driver, and a headless Chromium driven by playwright-core.
//
// Two passes: "trusted" (the workspace sets torchdoctor.interpreter to the repository's Python)
// and "untrusted" (workspace trust on, the folder not trusted, the workspace setting pointing at
// a trap script inside the workspace, the user-level setting at the repository's Python).
//
//   node scripts/integration.mjs        (needs Node 24, code-server, chromium; see .ci/vscode.sh)
import * as fs from "node:fs";
import * as path from "node:path";
import { chromium } from "playwright-core";
import {
  CHROMIUM,
  CHROMIUM_ARGS,
  CODE_SERVER,
  EXT_DIR,
  PYTHON,
  freePort,
  makeWorkspace,
  requireFile,
  scratch,
  startProcess,
  stopProcess,
  writeUserSettings,
} from "./lib.mjs";

const TIMEOUT_MS = Number(process.env.TORCHDOCTOR_TEST_TIMEOUT_MS || 300_000);
const verbose = process.env.TORCHDOCTOR_TEST_VERBOSE === "1";
const serverMain = path.join(CODE_SERVER, "lib", "vscode", "out", "server-main.js");
requireFile(serverMain, "the VS Code server of code-server");
requireFile(CHROMIUM, "chromium");
requireFile(PYTHON, "the Python interpreter with torchdoctor");
requireFile(path.join(EXT_DIR, "dist", "extension.js"), "the built extension (npm run build)");
requireFile(path.join(EXT_DIR, "out", "test", "index.js"), "the compiled tests (npm run build:tests)");

const started = Date.now();
const run = scratch("integration");
let browser;
const servers = [];
process.on("exit", () => servers.forEach(stopProcess));

/** Files under `dir` (recursively) whose name ends with `suffix`. */
function filesEndingWith(dir, suffix) {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true })
    .map((f) => path.join(dir, String(f)))
    .filter((f) => f.endsWith(suffix) && fs.statSync(f).isFile());
}

/**
 * The noise a user would see in the torchdoctor output channel or the extension host log: a
 * warning about a duplicate diagnostic collection, pygls' warning about a late cancel, or a
 * server message shown twice (once from window/logMessage, once from stderr as
 * "LEVEL torchdoctor.lsp: message").
 */
function logNoise(userData) {
  const logs = path.join(userData, "logs");
  const problems = [];
  for (const file of filesEndingWith(logs, "exthost.log")) {
    for (const line of fs.readFileSync(file, "utf8").split("\n")) {
      if (line.includes("DiagnosticCollection with name 'torchdoctor")) problems.push(line.trim());
    }
  }
  for (const file of filesEndingWith(logs, path.join("torchdoctor.torchdoctor", "torchdoctor.log"))) {
    const messages = fs.readFileSync(file, "utf8").split("\n").map((line) => line.replace(/^\S+ \S+ \[\w+\] /, ""));
    const plain = new Set(messages);
    for (const message of messages) {
      if (message.includes("Cancel notification for unknown message id")) problems.push(message);
      const fromStderr = /^[A-Z]+ torchdoctor\.lsp: (.*)$/.exec(message);
      if (fromStderr?.[1] !== undefined && plain.has(fromStderr[1])) problems.push(`twice: ${fromStderr[1]}`);
    }
  }
  return problems;
}

async function pass(name, { trusted }) {
  const dir = path.join(run, name);
  const workspace = path.join(dir, "workspace");
  const trap = path.join(workspace, ".venv", "bin", "python");
  const trapMarker = path.join(dir, "trap-ran");
  makeWorkspace(workspace, trusted ? {} : { "torchdoctor.interpreter": "${workspaceFolder}/.venv/bin/python" });
  if (!trusted) {
    // Running this "interpreter" would leave a marker; the untrusted suite checks there is none.
    fs.mkdirSync(path.dirname(trap), { recursive: true });
    fs.writeFileSync(trap, `#!/bin/sh\ntouch '${trapMarker}'\nexec '${PYTHON}' "$@"\n`);
    fs.chmodSync(trap, 0o755);
  }
  const userData = path.join(dir, "user-data");
  const serverData = path.join(dir, "server-data");
  const extensions = path.join(dir, "extensions");
  const home = path.join(dir, "home");
  for (const d of [userData, serverData, extensions, home]) fs.mkdirSync(d, { recursive: true });
  const userSettings = trusted
    ? {}
    : { "security.workspace.trust.enabled": true, "security.workspace.trust.startupPrompt": "never", "torchdoctor.interpreter": PYTHON };
  writeUserSettings(userData, userSettings);
  writeUserSettings(serverData, userSettings);
  // A stand-in for the Python extension's environments API, installed as a regular extension.
  fs.cpSync(path.join(EXT_DIR, "src", "test", "fixtures", "python-extension"), path.join(extensions, "ms-python.python-0.0.1"), {
    recursive: true,
  });
  const results = path.join(dir, "results.txt");
  fs.writeFileSync(results, "");

  const port = await freePort();
  const server = await startProcess(
    process.execPath,
    [
      serverMain,
      "--host", "127.0.0.1",
      "--port", String(port),
      "--without-connection-token",
      "--accept-server-license-terms",
      "--enable-smoke-test-driver",
      "--disable-telemetry",
      ...(trusted ? ["--disable-workspace-trust"] : []),
      "--user-data-dir", userData,
      "--server-data-dir", serverData,
      "--extensions-dir", extensions,
    ],
    {
      env: {
        ...process.env,
        HOME: home,
        VSCODE_CLI: "",
        TORCHDOCTOR_TEST_LOG: results,
        TORCHDOCTOR_TEST_SUITE: name,
        TORCHDOCTOR_TEST_PYTHON: PYTHON,
        TORCHDOCTOR_TEST_TRAP_MARKER: trapMarker,
      },
      logFile: path.join(dir, "server.log"),
      ready: /Extension host agent listening on|listening on/i,
    },
  );
  servers.push(server);

  const remote = (p) => `vscode-remote://127.0.0.1:${port}${p}`;
  const payload = [
    ["extensionDevelopmentPath", remote(EXT_DIR)],
    ["extensionTestsPath", remote(path.join(EXT_DIR, "out", "test", "index.js"))],
  ];
  const url = `http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}&payload=${encodeURIComponent(JSON.stringify(payload))}`;

  let exitCode = 1;
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    const page = await context.newPage();
    const exited = new Promise((resolve) => {
      void page.exposeFunction("codeAutomationExit", (code) => resolve(Number(code)));
    });
    await page.exposeFunction("codeAutomationLog", (type, args) => {
      if (verbose) console.log(`[${name}] [${type}]`, ...(Array.isArray(args) ? args : [args]));
    });
    await page.goto(url);
    const timeout = new Promise((resolve) => setTimeout(() => resolve("timeout"), TIMEOUT_MS));
    const outcome = await Promise.race([exited, timeout]);
    if (outcome === "timeout") {
      console.error(`${name}: integration tests did not finish within ${TIMEOUT_MS / 1000} s`);
      await page.screenshot({ path: path.join(dir, "timeout.png") }).catch(() => undefined);
    } else {
      exitCode = outcome;
    }
  } finally {
    await context.close().catch(() => undefined);
    stopProcess(server);
  }
  let text = fs.readFileSync(results, "utf8");
  const noise = logNoise(userData);
  text +=
    noise.length === 0
      ? "ok - the output channel and the extension host log are free of noise\n"
      : `not ok - the output channel and the extension host log are free of noise\n${noise.map((l) => `  ${l}\n`).join("")}`;
  if (text.trim() !== "") console.log(text.trimEnd().replace(/^/gm, `[${name}] `));
  const passed = (text.match(/^ok - /gm) ?? []).length;
  const failed = (text.match(/^not ok - /gm) ?? []).length;
  if (failed > 0 && exitCode === 0) exitCode = 1;
  if (exitCode === 0 && passed === 0) exitCode = 1; // nothing ran: the suite never loaded
  return { passed, failed, exitCode };
}

let total = { passed: 0, failed: 0, exitCode: 0 };
try {
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  for (const [name, options] of [["trusted", { trusted: true }], ["untrusted", { trusted: false }]]) {
    const r = await pass(name, options);
    total = { passed: total.passed + r.passed, failed: total.failed + r.failed, exitCode: total.exitCode || r.exitCode };
  }
} catch (err) {
  console.error(String(err?.stack ?? err));
  total.exitCode = 1;
} finally {
  await browser?.close().catch(() => undefined);
}
const seconds = ((Date.now() - started) / 1000).toFixed(1);
console.log(`integration: ${total.passed} passed, ${total.failed} failed, exit ${total.exitCode} (${seconds} s; logs in ${run})`);
process.exit(total.exitCode);
