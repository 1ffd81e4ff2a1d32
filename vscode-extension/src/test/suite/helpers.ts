import * as assert from "node:assert/strict";
import * as vscode from "vscode";

export const EXTENSION_ID = "torchdoctor.torchdoctor";

export function workspaceFile(name: string): vscode.Uri {
  const folder = vscode.workspace.workspaceFolders?.[0];
  assert.ok(folder, "the test runs with a workspace folder open");
  return vscode.Uri.joinPath(folder.uri, name);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` until it returns a value other than `undefined`, or fails after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(150);
  }
}

export function torchdoctorDiagnostics(uri: vscode.Uri): vscode.Diagnostic[] {
  return vscode.languages.getDiagnostics(uri).filter((d) => d.source === "torchdoctor");
}

export function codeOf(d: vscode.Diagnostic): string {
  if (d.code === undefined) return "";
  return typeof d.code === "object" ? String(d.code.value) : String(d.code);
}

/** Waits until the document has a torchdoctor diagnostic with each of `codes`. */
export function waitForCodes(uri: vscode.Uri, codes: string[], timeoutMs = 60_000): Promise<vscode.Diagnostic[]> {
  return waitFor(`${codes.join(", ")} on ${uri.toString()}`, () => {
    const found = torchdoctorDiagnostics(uri);
    const have = new Set(found.map(codeOf));
    return codes.every((c) => have.has(c)) ? found : undefined;
  }, timeoutMs);
}
