import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as vscode from "vscode";
import { EXTENSION_ID, waitFor, waitForCodes, workspaceFile } from "./helpers";

interface TorchdoctorApi {
  readonly state: string;
  readonly interpreter: string | undefined;
  readonly interpreterSource: string | undefined;
  readonly messages: readonly string[];
  ready(): Promise<void>;
}

describe("torchdoctor in an untrusted workspace", () => {
  it("runs in restricted mode", () => {
    assert.equal(vscode.workspace.isTrusted, false);
  });

  it("never runs the interpreter from workspace settings, and uses the user-level one", async () => {
    const document = await vscode.workspace.openTextDocument(workspaceFile("train.py"));
    await vscode.window.showTextDocument(document);
    const ext = vscode.extensions.getExtension<TorchdoctorApi>(EXTENSION_ID);
    assert.ok(ext);
    const td = ext.isActive ? ext.exports : await ext.activate();
    await waitFor("the server to run", async () => {
      await td.ready();
      return td.state === "running" ? true : undefined;
    }, 90_000);
    assert.equal(td.interpreter, process.env.TORCHDOCTOR_TEST_PYTHON);
    assert.equal(td.interpreterSource, "setting");
    await waitForCodes(document.uri, ["TDR602", "TDR105"]);

    const notice = td.messages.find((m) => m.includes("not trusted"));
    assert.ok(notice, `the user is told why; messages: ${JSON.stringify(td.messages)}`);
    assert.match(notice, /\.venv\/bin\/python/);
    assert.match(notice, /user-level torchdoctor\.interpreter/);

    const marker = process.env.TORCHDOCTOR_TEST_TRAP_MARKER;
    assert.ok(marker);
    assert.equal(fs.existsSync(marker), false, "the workspace's interpreter was never started");
  });
});
