// UI test in code-server with the packaged extension installed from its .vsix: squiggles, the
// Problems panel, a hover and the status bar item; saves .test-run/screenshots/problems-and-hover.png.
//
//   node scripts/ui.mjs [path/to/torchdoctor-x.y.z.vsix]
import { execFileSync } from "node:child_process";
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

const manifest = JSON.parse(fs.readFileSync(path.join(EXT_DIR, "package.json"), "utf8"));
const vsix = path.resolve(process.argv[2] ?? path.join(EXT_DIR, `torchdoctor-${manifest.version}.vsix`));
const entry = path.join(CODE_SERVER, "out", "node", "entry.js");
requireFile(vsix, "the packaged extension (npm run package)");
requireFile(entry, "code-server");
requireFile(CHROMIUM, "chromium");

const run = scratch("ui");
const workspace = makeWorkspace(path.join(run, "workspace"));
const userData = path.join(run, "user-data");
const extensions = path.join(run, "extensions");
const home = path.join(run, "home");
for (const d of [userData, extensions, home]) fs.mkdirSync(d, { recursive: true });
writeUserSettings(userData);
const env = { ...process.env, HOME: home };
const common = ["--user-data-dir", userData, "--extensions-dir", extensions];
const started = Date.now();

execFileSync(process.execPath, [entry, ...common, "--install-extension", vsix], { env, stdio: "pipe" });
const installed = fs.readdirSync(extensions).filter((n) => n.startsWith(`${manifest.publisher}.${manifest.name}-`));
if (installed.length !== 1) throw new Error(`the .vsix did not install: ${fs.readdirSync(extensions).join(", ")}`);

const port = await freePort();
const server = await startProcess(
  process.execPath,
  [
    entry,
    "--bind-addr", `127.0.0.1:${port}`,
    "--auth", "none",
    ...common,
    "--disable-telemetry",
    "--disable-update-check",
    "--disable-workspace-trust",
    "--disable-getting-started-override",
    workspace,
  ],
  { env, logFile: path.join(run, "code-server.log"), ready: /HTTP server listening on/ },
);
process.on("exit", () => stopProcess(server));

const checks = [];
const check = (what, ok) => {
  checks.push(`${ok ? "ok" : "not ok"} - ${what}`);
  if (!ok) throw new Error(`UI check failed: ${what}`);
};

/**
 * A workspace whose interpreter lacks torchdoctor (a fresh virtual environment): the user gets
 * one message, clicks "Install torchdoctor", and diagnostics arrive.
 */
async function installFlow(page) {
  const freshEnv = path.join(run, "fresh-env");
  execFileSync(PYTHON, ["-m", "venv", freshEnv], { stdio: "pipe" });
  const freshPython = path.join(freshEnv, "bin", "python");
  await clickInstall(page, "workspace-fresh", freshPython);
  const status = (await page.locator(".statusbar-item", { hasText: "torchdoctor" }).first().innerText()).trim();
  check(`after "Install torchdoctor" diagnostics arrive from the new install ("${status}")`, status.includes("fresh-env"));
}

/**
 * The system's Python, which refuses pip installs (PEP 668, as on Debian): "Install torchdoctor"
 * creates an environment of the extension's own and the server runs from there. Skipped where
 * the system Python is not marked externally managed (pip would then change the system).
 */
async function systemPythonFlow(page) {
  const system = "/usr/bin/python3";
  let managed;
  try {
    const marker = execFileSync(system, ["-c", "import os, sysconfig; print(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED'))"], { encoding: "utf8" }).trim();
    managed = fs.existsSync(marker);
  } catch {
    managed = false;
  }
  if (!managed) {
    checks.push(`skip - ${system} is not externally managed here`);
    return;
  }
  await clickInstall(page, "workspace-system", system);
  const status = (await page.locator(".statusbar-item", { hasText: "torchdoctor" }).first().innerText()).trim();
  check(`an externally managed Python gets an environment of torchdoctor's own ("${status}")`, status.includes("python-env"));
}

/** Opens a workspace whose interpreter lacks torchdoctor, checks the one message, clicks Install. */
async function clickInstall(page, name, python) {
  const ws = makeWorkspace(path.join(run, name), { "torchdoctor.interpreter": python });
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(ws)}`);
  await page.waitForSelector(".monaco-workbench", { timeout: 60_000 });
  const row = page.locator(".explorer-folders-view .monaco-list-row", { hasText: "train.py" }).first();
  await row.waitFor({ timeout: 30_000 });
  await row.click();
  const toast = page.locator(".notification-toast", { hasText: "torchdoctor is not installed in" });
  await toast.first().waitFor({ timeout: 60_000 });
  check(`a message says torchdoctor is missing from ${python}`, (await toast.first().innerText()).includes(python));
  await page.waitForTimeout(1000);
  check("the message is shown once", (await toast.count()) === 1);
  await toast.locator(".monaco-button", { hasText: "Install torchdoctor" }).first().click();
  const squiggle = page.locator(".squiggly-warning, .squiggly-error, .squiggly-info").first();
  await squiggle.waitFor({ state: "attached", timeout: 240_000 });
}

let browser;
let exitCode = 1;
try {
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  const page = await browser.newPage({ viewport: { width: 1000, height: 620 } });
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`);
  await page.waitForSelector(".monaco-workbench", { timeout: 60_000 });

  const row = page.locator(".explorer-folders-view .monaco-list-row", { hasText: "train.py" }).first();
  await row.waitFor({ timeout: 30_000 });
  await row.click();
  await page.keyboard.press("Control+B"); // hide the side bar: room for the editor and the panel
  const squiggle = page.locator(".squiggly-warning, .squiggly-error, .squiggly-info").first();
  await squiggle.waitFor({ state: "attached", timeout: 60_000 });
  check("torchdoctor's diagnostics show as squiggles in the editor", true);

  const status = page.locator(".statusbar-item", { hasText: "torchdoctor" }).first();
  await status.waitFor({ timeout: 20_000 });
  const statusText = (await status.innerText()).trim();
  check(`the status bar shows the server and its interpreter ("${statusText}")`, /torchdoctor\s*·\s*3\.\d+/.test(statusText));

  await page.keyboard.press("Control+Shift+M");
  const markers = page.locator(".markers-panel");
  await markers.waitFor({ timeout: 20_000 });
  await page.locator(".markers-panel .monaco-list-row", { hasText: "TDR105" }).first().waitFor({ timeout: 20_000 });
  const problems = await markers.innerText();
  check("the Problems panel lists TDR105 and TDR602", problems.includes("TDR105") && problems.includes("TDR602"));

  // Hover the TDR105 squiggle (the forward call on line 8).
  await page.locator(".monaco-editor .view-line", { hasText: "correct +=" }).first().waitFor();
  const line = page.locator(".monaco-editor .view-line", { hasText: "correct +=" }).first();
  const textSpan = line.locator(":scope > span").first(); // as wide as the text (the line is wider)
  const box = await textSpan.boundingBox();
  const text = await textSpan.innerText();
  if (box === null) throw new Error("line 8 is not visible");
  const charWidth = box.width / Math.max(1, text.length);
  const column = text.indexOf("model(x)") + 2;
  const hover = page.locator(".monaco-hover:visible", { hasText: "TDR105" }).first();
  // Put the cursor on `model(x)` and show the hover from the keyboard (Ctrl+K Ctrl+I).
  await page.mouse.click(box.x + charWidth * column, box.y + box.height / 2);
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press("Control+K");
    await page.keyboard.press("Control+I");
    try {
      await hover.waitFor({ timeout: 5_000 });
      break;
    } catch (err) {
      if (attempt === 4) throw err;
    }
  }
  check("hovering the finding shows TDR105", (await hover.innerText()).includes("TDR105"));
  // The server's own hover (rule name, why, fix) joins VS Code's marker hover.
  await page.locator(".monaco-hover:visible", { hasText: "eval-without-no-grad" }).first().waitFor({ timeout: 20_000 });
  check("the hover carries the server's explanation of the rule", true);
  await page.waitForTimeout(300);

  // Into the git-ignored .test-run/, so that a test run leaves the work tree clean; the
  // screenshot kept in git (screenshots/) is refreshed by copying this one there.
  const shot = path.join(EXT_DIR, ".test-run", "screenshots", "problems-and-hover.png");
  fs.mkdirSync(path.dirname(shot), { recursive: true });
  await page.screenshot({ path: shot });
  check(`screenshot saved (${Math.round(fs.statSync(shot).size / 1024)} KB)`, true);

  if (process.env.TORCHDOCTOR_UI_SKIP_INSTALL !== "1") {
    await installFlow(page);
    await systemPythonFlow(page);
  }
  exitCode = 0;
} catch (err) {
  console.error(String(err?.stack ?? err));
  const page = browser?.contexts()[0]?.pages()[0];
  await page?.screenshot({ path: path.join(run, "failure.png") }).catch(() => undefined);
} finally {
  await browser?.close().catch(() => undefined);
  stopProcess(server);
}
for (const line of checks) console.log(line);
console.log(`ui: ${exitCode === 0 ? "passed" : "failed"} (${((Date.now() - started) / 1000).toFixed(1)} s; logs in ${run})`);
process.exit(exitCode);
