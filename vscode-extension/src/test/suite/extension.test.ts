import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as vscode from "vscode";
import { EXTENSION_ID, codeOf, sleep, torchdoctorDiagnostics, waitFor, waitForCodes, workspaceFile } from "./helpers";

interface TorchdoctorApi {
  readonly client: { initializeResult?: { capabilities: { notebookDocumentSync?: unknown } } } | undefined;
  readonly state: string;
  readonly interpreter: string | undefined;
  readonly interpreterSource: string | undefined;
  readonly messages: readonly string[];
  ready(): Promise<void>;
}

async function api(): Promise<TorchdoctorApi> {
  const ext = vscode.extensions.getExtension<TorchdoctorApi>(EXTENSION_ID);
  assert.ok(ext, `${EXTENSION_ID} is loaded`);
  return ext.isActive ? ext.exports : await ext.activate();
}

async function openPython(name: string): Promise<vscode.TextEditor> {
  const document = await vscode.workspace.openTextDocument(workspaceFile(name));
  return vscode.window.showTextDocument(document);
}

describe("torchdoctor in VS Code", () => {
  before(async function () {
    this.timeout(120_000);
    await openPython("train.py"); // activates the extension (onLanguage:python)
    const td = await api();
    await waitFor("the server to run", async () => {
      await td.ready();
      return td.state === "running" ? true : undefined;
    }, 90_000);
  });

  it("starts the server with the interpreter from torchdoctor.interpreter", async () => {
    const td = await api();
    const configured = vscode.workspace.getConfiguration("torchdoctor").get<string>("interpreter");
    assert.ok(configured, "the test workspace sets torchdoctor.interpreter");
    assert.equal(td.interpreter, configured);
    assert.equal(td.state, "running");
  });

  it("publishes diagnostics for an example training script", async () => {
    const uri = workspaceFile("examples/train_classifier.py");
    if (!fs.existsSync(uri.fsPath)) return; // the repository's examples are copied in by the runner
    await openPython("examples/train_classifier.py");
    const found = await waitFor("diagnostics on the example", () => {
      const d = torchdoctorDiagnostics(uri);
      return d.length > 0 ? d : undefined;
    });
    for (const d of found) {
      assert.match(codeOf(d), /^TDR\d{3}$/);
      assert.ok(typeof d.code === "object" && d.code.target.toString() !== "", "diagnostics link to the rule's page");
    }
  });

  it("applies the TDR105 quick fix through the code action provider", async () => {
    const editor = await openPython("train.py");
    const uri = editor.document.uri;
    const diagnostics = await waitForCodes(uri, ["TDR105", "TDR602"]);
    const tdr105 = diagnostics.find((d) => codeOf(d) === "TDR105");
    assert.ok(tdr105);
    assert.equal(tdr105.range.start.line, 7, "TDR105 points at the forward call in the loop");

    const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>(
      "vscode.executeCodeActionProvider",
      uri,
      tdr105.range,
      vscode.CodeActionKind.QuickFix.value,
      50,
    );
    const titles = actions.map((a) => a.title);
    const wrap = actions.find((a) => a.title.includes("no_grad"));
    assert.ok(wrap, `a quick fix wraps the loop in torch.no_grad(); got ${JSON.stringify(titles)}`);
    assert.ok(!titles.some((t) => t.includes("inference_mode")), `TDR105 offers no inference_mode edit (TDR106 does, where safe); got ${JSON.stringify(titles)}`);
    assert.ok(wrap.edit, "the quick fix carries its edit");
    assert.ok(await vscode.workspace.applyEdit(wrap.edit));

    assert.equal(
      editor.document.getText(),
      [
        "import torch",
        "",
        "",
        "def evaluate(model, val_loader):",
        "    model.eval()",
        "    correct = 0",
        "    with torch.no_grad():",
        "        for x, y in val_loader:",
        "            correct += (model(x).argmax(1) == y).sum().item()",
        "    return correct",
        "",
        "",
        'state = torch.load("checkpoint.pt")',
        'model = torch.nn.Linear(8, 2).to("cuda" if torch.cuda.is_available() else "cpu")',
        "print(evaluate(model, val_loader))",
        "",
      ].join("\n"),
    );
    // The server re-checks the edited text: TDR105 goes away, TDR602 stays.
    await waitFor("TDR105 to disappear", () => {
      const codes = torchdoctorDiagnostics(uri).map(codeOf);
      return !codes.includes("TDR105") && codes.includes("TDR602") ? true : undefined;
    });
  });

  it("fixes all safe problems with the Fix All command", async () => {
    const editor = await openPython("train.py");
    await waitForCodes(editor.document.uri, ["TDR602"]);
    await vscode.commands.executeCommand("torchdoctor.fixAll");
    await waitFor("the fix-all edit", () => (editor.document.getText().includes('torch.load("checkpoint.pt", map_location="cpu")') ? true : undefined), 20_000);
    await waitFor("no TDR602 left", () => (torchdoctorDiagnostics(editor.document.uri).some((d) => codeOf(d) === "TDR602") ? undefined : true));
    await vscode.commands.executeCommand("workbench.action.files.revert");
  });

  it("fixes on save through source.fixAll.torchdoctor, unless torchdoctor.fixAll is off", async () => {
    const editor = await openPython("train.py");
    const document = editor.document;
    const original = document.getText();
    const fixed = 'torch.load("checkpoint.pt", map_location="cpu")';
    const editorConfig = vscode.workspace.getConfiguration("editor", { languageId: "python" });
    const config = vscode.workspace.getConfiguration("torchdoctor");
    const touchAndSave = async (): Promise<void> => {
      const edit = new vscode.WorkspaceEdit();
      edit.insert(document.uri, new vscode.Position(0, 0), "# touched\n");
      assert.ok(await vscode.workspace.applyEdit(edit));
      await waitForCodes(document.uri, ["TDR602"]);
      assert.ok(await document.save());
    };
    await editorConfig.update("codeActionsOnSave", { "source.fixAll.torchdoctor": "always" }, vscode.ConfigurationTarget.Workspace, true);
    try {
      await config.update("fixAll", false, vscode.ConfigurationTarget.Workspace);
      await touchAndSave();
      assert.ok(!document.getText().includes(fixed), "with torchdoctor.fixAll off, saving fixes nothing");

      await config.update("fixAll", true, vscode.ConfigurationTarget.Workspace);
      await touchAndSave();
      assert.ok(document.getText().includes(fixed), "saving applied the safe TDR602 fix");
    } finally {
      await editorConfig.update("codeActionsOnSave", undefined, vscode.ConfigurationTarget.Workspace, true);
      await config.update("fixAll", undefined, vscode.ConfigurationTarget.Workspace);
      const restore = new vscode.WorkspaceEdit();
      restore.replace(document.uri, new vscode.Range(0, 0, document.lineCount, 0), original);
      await vscode.workspace.applyEdit(restore);
      await document.save();
    }
  });

  it("reports diagnostics per notebook cell", async () => {
    const td = await api();
    assert.ok(td.client?.initializeResult?.capabilities.notebookDocumentSync, "cells are synced as notebook documents");
    const notebook = await vscode.workspace.openNotebookDocument(workspaceFile("explore.ipynb"));
    await vscode.window.showNotebookDocument(notebook);
    const cells = notebook.getCells();
    assert.equal(cells.length, 4);
    const loadCell = cells[2];
    assert.ok(loadCell);
    assert.equal(loadCell.document.uri.scheme, "vscode-notebook-cell");
    const found = await waitForCodes(loadCell.document.uri, ["TDR602"]);
    const tdr602 = found.find((d) => codeOf(d) === "TDR602");
    assert.ok(tdr602);
    assert.equal(tdr602.range.start.line, 0, "positions are relative to the cell");
    assert.equal(tdr602.range.start.character, 8);
    // Give the other cells time to receive anything they would get, then check they are clean.
    await sleep(500);
    for (const i of [0, 3]) {
      const cell = cells[i];
      assert.ok(cell);
      assert.deepEqual(torchdoctorDiagnostics(cell.document.uri).map(codeOf), [], `cell ${i} has no findings`);
    }
  });

  it("reports the findings of cells not scrolled into view, and keeps them", async () => {
    const notebook = await vscode.workspace.openNotebookDocument(workspaceFile("long.ipynb"));
    const editor = await vscode.window.showNotebookDocument(notebook);
    const cells = notebook.getCells();
    const last = cells[cells.length - 1];
    assert.ok(last);
    // 41 cells of 14 lines: the last one is far below the first screen.
    const inView = editor.visibleRanges.some((r) => r.start <= last.index && last.index < r.end);
    assert.ok(!inView, "the last cell is out of view");
    await waitForCodes(last.document.uri, ["TDR602"], 30_000);
    // Scrolled into view and out again, its findings stay in the Problems panel.
    editor.revealRange(new vscode.NotebookRange(last.index, last.index + 1));
    await sleep(500);
    editor.revealRange(new vscode.NotebookRange(0, 1));
    await sleep(1500);
    assert.deepEqual(torchdoctorDiagnostics(last.document.uri).map(codeOf), ["TDR602"]);
  });

  it("registers its commands", async () => {
    const commands = await vscode.commands.getCommands(true);
    for (const id of ["torchdoctor.restart", "torchdoctor.showOutput", "torchdoctor.fixAll", "torchdoctor.openRuleDocs"]) {
      assert.ok(commands.includes(id), `${id} is registered`);
    }
  });

  it("restarts with new settings: torchdoctor.ignore hides a rule", async () => {
    const td = await api();
    const editor = await openPython("train.py");
    const uri = editor.document.uri;
    await waitForCodes(uri, ["TDR602"]);
    const config = vscode.workspace.getConfiguration("torchdoctor");
    await config.update("ignore", ["tdr602"], vscode.ConfigurationTarget.Workspace);
    try {
      await waitFor("TDR602 to be ignored", async () => {
        await td.ready();
        const codes = torchdoctorDiagnostics(uri).map(codeOf);
        return td.state === "running" && codes.length > 0 && !codes.includes("TDR602") ? true : undefined;
      });
    } finally {
      await config.update("ignore", undefined, vscode.ConfigurationTarget.Workspace);
    }
    await waitForCodes(uri, ["TDR602"]);
  });

  it("stops when torchdoctor.enable is off and clears its diagnostics", async () => {
    const td = await api();
    const editor = await openPython("train.py");
    const uri = editor.document.uri;
    await waitForCodes(uri, ["TDR602"]);
    const config = vscode.workspace.getConfiguration("torchdoctor");
    await config.update("enable", false, vscode.ConfigurationTarget.Workspace);
    try {
      await waitFor("the server to stop", async () => {
        await td.ready();
        return td.state === "disabled" && torchdoctorDiagnostics(uri).length === 0 ? true : undefined;
      });
    } finally {
      await config.update("enable", undefined, vscode.ConfigurationTarget.Workspace);
    }
    await waitForCodes(uri, ["TDR602"]);
    assert.equal(td.state, "running");
  });

  it("uses the Python extension's interpreter when torchdoctor.interpreter is empty, and follows its changes", async () => {
    const td = await api();
    const python = td.interpreter;
    assert.ok(python);
    const config = vscode.workspace.getConfiguration("torchdoctor");
    const missing = "/nonexistent/bin/python3";
    try {
      await vscode.commands.executeCommand("testPython.selectInterpreter", python);
      await config.update("interpreter", undefined, vscode.ConfigurationTarget.Workspace);
      await waitFor("the Python extension's interpreter", async () => {
        await td.ready();
        return td.state === "running" && td.interpreterSource === "pythonExtension" ? true : undefined;
      });
      assert.equal(td.interpreter, python);
      const editor = await openPython("train.py");
      await waitForCodes(editor.document.uri, ["TDR602"]);

      // The user picks another interpreter in the Python extension: torchdoctor follows.
      await vscode.commands.executeCommand("testPython.selectInterpreter", missing);
      await waitFor("a restart with the new interpreter", async () => {
        await td.ready();
        return td.interpreter === missing && td.state === "error" ? true : undefined;
      });
    } finally {
      await config.update("interpreter", python, vscode.ConfigurationTarget.Workspace);
      await vscode.commands.executeCommand("testPython.selectInterpreter", "");
    }
    await waitFor("the configured interpreter again", async () => {
      await td.ready();
      return td.state === "running" && td.interpreterSource === "setting" ? true : undefined;
    });
  });

  it("takes torchdoctor.interpreter as a list of one path, and says what is wrong with a longer one", async () => {
    const td = await api();
    const python = td.interpreter;
    assert.ok(python);
    const config = vscode.workspace.getConfiguration("torchdoctor");
    try {
      // The form of Ruff's ruff.interpreter: no "p.trim is not a function", the server runs on it.
      await config.update("interpreter", [python], vscode.ConfigurationTarget.Workspace);
      await waitFor("the server on the listed interpreter", async () => {
        await td.ready();
        return td.state === "running" && td.interpreterSource === "setting" && td.interpreter === python ? true : undefined;
      });
      await config.update("interpreter", [python, "/other/bin/python"], vscode.ConfigurationTarget.Workspace);
      const shown = await waitFor("a warning about the setting", async () => {
        await td.ready();
        return td.messages.find((m) => m.includes("must be one path"));
      });
      assert.match(shown, /torchdoctor\.interpreter \((folder|workspace) settings\) must be one path/);
      assert.notEqual(td.interpreterSource, "setting");
    } finally {
      await config.update("interpreter", python, vscode.ConfigurationTarget.Workspace);
    }
    await waitFor("the configured interpreter again", async () => {
      await td.ready();
      return td.state === "running" && td.interpreterSource === "setting" ? true : undefined;
    });
  });

  it("restarts the server and publishes again", async () => {
    const td = await api();
    await vscode.commands.executeCommand("torchdoctor.restart");
    await td.ready();
    assert.equal(td.state, "running");
    const editor = await openPython("train.py");
    await waitForCodes(editor.document.uri, ["TDR602"]);
  });
});
