/** The parts of the Python extension's (`ms-python.python`) exported API that torchdoctor uses. */
import * as vscode from "vscode";

interface EnvironmentPath {
  id: string;
  path: string;
}

interface ResolvedEnvironment {
  executable?: { uri?: vscode.Uri | undefined } | undefined;
}

interface PythonEnvironmentsApi {
  getActiveEnvironmentPath(resource?: vscode.Uri): EnvironmentPath;
  resolveEnvironment(env: EnvironmentPath | string): Promise<ResolvedEnvironment | undefined>;
  onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
}

interface PythonExtensionApi {
  environments?: PythonEnvironmentsApi;
  settings?: {
    getExecutionDetails?(resource?: vscode.Uri): { execCommand: string[] | undefined };
    onDidChangeExecutionDetails?: vscode.Event<unknown>;
  };
}

export const PYTHON_EXTENSION_ID = "ms-python.python";

export function isPythonExtensionInstalled(): boolean {
  return vscode.extensions.getExtension(PYTHON_EXTENSION_ID) !== undefined;
}

async function api(): Promise<PythonExtensionApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonExtensionApi | undefined>(PYTHON_EXTENSION_ID);
  if (ext === undefined) return undefined;
  const exports = ext.isActive ? ext.exports : await ext.activate();
  return exports ?? undefined;
}

/** The interpreter the Python extension selected for `resource`, or `undefined`. */
export async function selectedInterpreter(resource: vscode.Uri | undefined): Promise<string | undefined> {
  const python = await api();
  if (python === undefined) return undefined;
  const environments = python.environments;
  if (environments !== undefined) {
    const active = environments.getActiveEnvironmentPath(resource);
    const resolved = await environments.resolveEnvironment(active);
    const fsPath = resolved?.executable?.uri?.fsPath;
    if (fsPath !== undefined && fsPath !== "") return fsPath;
  }
  const command = python.settings?.getExecutionDetails?.(resource).execCommand;
  if (command !== undefined && command.length === 1 && command[0] !== undefined && command[0] !== "") {
    return command[0];
  }
  return undefined;
}

/** Calls `listener` whenever the Python extension's selected interpreter changes. */
export async function onInterpreterChange(listener: () => void): Promise<vscode.Disposable | undefined> {
  const python = await api();
  if (python === undefined) return undefined;
  if (python.environments !== undefined) return python.environments.onDidChangeActiveEnvironmentPath(() => { listener(); });
  return python.settings?.onDidChangeExecutionDetails?.(() => { listener(); });
}
