// Runs the mocha suites of src/test inside a real VS Code: the VS Code server that code-server
// bundles, started with the smoke-test driver, and a headless Chromium driven by playwright-core.
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
const serverMain = path.join(CODE_SERVER, "lib", "vscode", "out", "server-main.js");
requireFile(serverMain, "the VS Code server of code-server");
requireFile(CHROMIUM, "chromium");
requireFile(PYTHON, "the Python interpreter with torchdoctor");
requireFile(path.join(EXT_DIR, "dist", "extension.js"), "the built extension (npm run build)");
requireFile(path.join(EXT_DIR, "out", "test", "index.js"), "the compiled tests (npm run build:tests)");

const run = scratch("integration");
const workspace = makeWorkspace(path.join(run, "workspace"));
const userData = path.join(run, "user-data");
const serverData = path.join(run, "server-data");
const extensions = path.join(run, "extensions");
const home = path.join(run, "home");
for (const d of [userData, serverData, extensions, home]) fs.mkdirSync(d, { recursive: true });
writeUserSettings(userData);
// A stand-in for the Python extension's environments API, installed as a regular extension.
fs.cpSync(path.join(EXT_DIR, "src", "test", "fixtures", "python-extension"), path.join(extensions, "ms-python.python-0.0.1"), {
  recursive: true,
});
writeUserSettings(serverData);
const results = path.join(run, "results.txt");
fs.writeFileSync(results, "");

const port = await freePort();
const started = Date.now();
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
    "--disable-workspace-trust",
    "--user-data-dir", userData,
    "--server-data-dir", serverData,
    "--extensions-dir", extensions,
  ],
  {
    env: { ...process.env, HOME: home, TORCHDOCTOR_TEST_LOG: results, VSCODE_CLI: "" },
    logFile: path.join(run, "server.log"),
    ready: /Extension host agent listening on|listening on/i,
  },
);

const remote = (p) => `vscode-remote://127.0.0.1:${port}${p}`;
const payload = [
  ["extensionDevelopmentPath", remote(EXT_DIR)],
  ["extensionTestsPath", remote(path.join(EXT_DIR, "out", "test", "index.js"))],
];
const url = `http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}&payload=${encodeURIComponent(JSON.stringify(payload))}`;

process.on("exit", () => stopProcess(server));
let exitCode = 1;
let browser;
try {
  // playwright gives each launch a fresh, temporary profile.
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const verbose = process.env.TORCHDOCTOR_TEST_VERBOSE === "1";
  const exited = new Promise((resolve) => {
    page.exposeFunction("codeAutomationExit", (code) => resolve(Number(code)));
  });
  await page.exposeFunction("codeAutomationLog", (type, args) => {
    if (verbose) console.log(`[${type}]`, ...(Array.isArray(args) ? args : [args]));
  });
  await page.goto(url);
  const timeout = new Promise((resolve) => setTimeout(() => resolve("timeout"), TIMEOUT_MS));
  const outcome = await Promise.race([exited, timeout]);
  if (outcome === "timeout") {
    console.error(`integration tests did not finish within ${TIMEOUT_MS / 1000} s`);
    await page.screenshot({ path: path.join(run, "timeout.png") }).catch(() => undefined);
  } else {
    exitCode = outcome;
  }
} finally {
  await browser?.close().catch(() => undefined);
  stopProcess(server);
}

const text = fs.readFileSync(results, "utf8");
process.stdout.write(text);
const passed = (text.match(/^ok - /gm) ?? []).length;
const failed = (text.match(/^not ok - /gm) ?? []).length;
const seconds = ((Date.now() - started) / 1000).toFixed(1);
console.log(`integration: ${passed} passed, ${failed} failed, exit ${exitCode} (${seconds} s; logs in ${run})`);
if (exitCode === 0 && passed === 0) exitCode = 1; // nothing ran: the suite never loaded
process.exit(exitCode);
