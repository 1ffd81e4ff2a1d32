/**
 * Entry point VS Code loads as `extensionTestsPath`: runs the mocha suites in out/test/suite
 * inside the extension host. Each result line also goes to $TORCHDOCTOR_TEST_LOG when set.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import Mocha from "mocha";

export function run(): Promise<void> {
  const logFile = process.env.TORCHDOCTOR_TEST_LOG;
  const log = (line: string): void => {
    console.log(line);
    if (logFile) fs.appendFileSync(logFile, line + "\n");
  };
  const mocha = new Mocha({ ui: "bdd", timeout: 90_000, color: false, reporter: "spec" });
  // TORCHDOCTOR_TEST_SUITE=untrusted runs untrusted.test.js alone; otherwise it is left out.
  const untrusted = process.env.TORCHDOCTOR_TEST_SUITE === "untrusted";
  const suiteDir = path.join(__dirname, "suite");
  const files = fs.readdirSync(suiteDir).filter((f) => f.endsWith(".test.js") && (f === "untrusted.test.js") === untrusted);
  for (const file of files.sort()) {
    mocha.addFile(path.join(suiteDir, file));
  }
  return new Promise((resolve, reject) => {
    const runner = mocha.run((failures) => {
      log(`# ${failures} failed`);
      if (failures > 0) reject(new Error(`${failures} integration test(s) failed`));
      else resolve();
    });
    runner.on("pass", (test) => { log(`ok - ${test.fullTitle()} (${test.duration ?? 0} ms)`); });
    runner.on("fail", (test, err: Error) => { log(`not ok - ${test.fullTitle()}\n  ${(err.stack ?? err.message).split("\n").join("\n  ")}`); });
  });
}
