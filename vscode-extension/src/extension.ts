/**
 * The torchdoctor extension: starts `python -m torchdoctor server` with the right interpreter,
 * keeps it in step with settings, interpreter changes and workspace trust, and offers to install
 * torchdoctor where it is missing.
 */
import * as fs from "node:fs";
import * as readline from "node:readline";
import * as vscode from "vscode";
import {
  CloseAction,
  DocumentDiagnosticRequest,
  ErrorAction,
  LanguageClient,
  RevealOutputChannelOn,
  State,
  type LanguageClientOptions,
  type ServerOptions as ClientServerOptions,
} from "vscode-languageclient/node";
import { CellDiagnostics } from "./cellDiagnostics";
import { resolveInterpreter, workspaceInterpreterSetting, type InterpreterSource, errorText } from "./interpreter";
import { setTranslator, t } from "./l10n";
import { actionTitle, CrashTracker, crashedMessage, noInterpreterMessage, probeFailureMessage, settingProblemMessage, type Action, type UserMessage } from "./messages";
import {
  classifyPipFailure,
  installTarget,
  pipInstallArgs,
  probe,
  pythonEnv,
  run,
  serverArgs,
  stderrLevel,
  venvPython,
  type ProbeInfo,
} from "./python";
import { isPythonExtensionInstalled, onInterpreterChange, selectedInterpreter } from "./pythonExtension";
import { SECTION, needsRestart, readSettings, ruleDocsUrl, toServerOptions, type Settings } from "./settings";
import { statusView, type ServerState } from "./status";

export const FIX_ALL_KIND = vscode.CodeActionKind.SourceFixAll.append("torchdoctor");
const NOTEBOOK_FIX_ALL_KIND = vscode.CodeActionKind.Notebook.append(FIX_ALL_KIND.value);

function isFixAllKind(kind: vscode.CodeActionKind | undefined): boolean {
  return kind !== undefined && (FIX_ALL_KIND.contains(kind) || NOTEBOOK_FIX_ALL_KIND.contains(kind));
}
const MANAGED_ENV_KEY = "torchdoctor.managedInterpreter";

export interface TorchdoctorApi {
  /** The running language client, for tests and other extensions. */
  readonly client: LanguageClient | undefined;
  readonly state: ServerState;
  readonly interpreter: string | undefined;
  /** Where the interpreter came from: "setting", "pythonExtension" or "path". */
  readonly interpreterSource: InterpreterSource | undefined;
  /** The messages shown to the user in this session, oldest first. */
  readonly messages: readonly string[];
  /** Resolves once the current (re)start attempt has finished. */
  ready(): Promise<void>;
  restart(): Promise<void>;
}

interface Current {
  python?: string;
  source?: InterpreterSource;
  info?: ProbeInfo;
  detail?: string;
}

/** Settings as configured (explicit values only, so that unset keys defer to `pyproject.toml`). */
function settingsFor(scope?: vscode.ConfigurationScope): { settings: Settings; problems: string[] } {
  const config = vscode.workspace.getConfiguration(SECTION, scope);
  return readSettings((key) => {
    const inspected = config.inspect(key);
    if (inspected === undefined) return undefined;
    if (key === "interpreter") return undefined; // resolved separately, with workspace trust in mind
    return inspected.workspaceFolderValue ?? inspected.workspaceValue ?? inspected.globalValue;
  });
}

class Torchdoctor implements TorchdoctorApi {
  client: LanguageClient | undefined;
  state: ServerState = "stopped";
  private current: Current = {};
  private settings: Settings;
  private readonly output: vscode.LogOutputChannel;
  private readonly statusItem: vscode.StatusBarItem;
  private readonly crashes = new CrashTracker();
  private queue: Promise<void> = Promise.resolve();
  private readonly shownMessages = new Set<string>();
  readonly messages: string[] = [];
  private restartTimer: NodeJS.Timeout | undefined;
  private readonly cells = new CellDiagnostics("torchdoctor.cells");
  private clientListeners: vscode.Disposable | undefined;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel("torchdoctor", { log: true });
    this.statusItem = vscode.window.createStatusBarItem("torchdoctor.status", vscode.StatusBarAlignment.Right, 100);
    this.statusItem.name = "torchdoctor";
    this.statusItem.command = "torchdoctor.showOutput";
    this.settings = settingsFor().settings;
    context.subscriptions.push(this.output, this.statusItem, this.cells);
  }

  get interpreter(): string | undefined {
    return this.current.python;
  }

  get interpreterSource(): InterpreterSource | undefined {
    return this.current.source;
  }

  ready(): Promise<void> {
    return this.queue;
  }

  /** Runs start/stop steps one after another, never two at once. */
  private enqueue(step: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(step, step).catch((err: unknown) => {
      this.output.error(`Unexpected error: ${errorText(err)}`);
      this.setState("error", errorText(err));
    });
    return this.queue;
  }

  restart(): Promise<void> {
    this.crashes.reset();
    return this.enqueue(async () => {
      await this.stopClient();
      await this.startClient();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.stopClient());
  }

  /** Restarts soon: several changes in a row (typing in settings.json) cause one restart. */
  scheduleRestart(reason: string): void {
    if (this.restartTimer !== undefined) clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.output.info(`Restarting: ${reason}.`);
      void this.restart();
    }, 300);
  }

  onConfigurationChanged(event: vscode.ConfigurationChangeEvent): void {
    if (!event.affectsConfiguration(SECTION)) return;
    const before = this.settings;
    const { settings, problems } = settingsFor();
    this.settings = settings;
    for (const problem of problems) this.output.warn(problem);
    if (event.affectsConfiguration(`${SECTION}.interpreter`)) {
      this.scheduleRestart("torchdoctor.interpreter changed");
    } else if (needsRestart(before, settings)) {
      this.scheduleRestart("settings changed");
    }
  }

  private setState(state: ServerState, detail?: string): void {
    this.state = state;
    if (detail !== undefined) this.current.detail = detail;
    else delete this.current.detail;
    const view = statusView({
      state,
      python: this.current.python,
      pythonVersion: this.current.info?.version,
      isVenv: this.current.info?.venv,
      source: this.current.source,
      torchdoctorVersion: this.current.info?.torchdoctor,
      detail: this.current.detail,
    });
    this.statusItem.text = view.text;
    this.statusItem.tooltip = view.tooltip;
    this.statusItem.backgroundColor =
      view.severity === "error"
        ? new vscode.ThemeColor("statusBarItem.errorBackground")
        : view.severity === "warning"
          ? new vscode.ThemeColor("statusBarItem.warningBackground")
          : undefined;
    this.statusItem.show();
  }

  /** The folder the extension's Python processes run in: never the workspace (see `pythonEnv`). */
  private get processCwd(): string {
    return this.context.extensionUri.fsPath;
  }

  private async stopClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.clientListeners?.dispose();
    this.clientListeners = undefined;
    this.cells.clear();
    if (client === undefined) return;
    try {
      if (client.state !== State.Stopped) await client.stop(2000);
    } catch (err) {
      this.output.warn(`Stopping the server: ${errorText(err)}`);
    }
    try {
      await client.dispose(2000);
    } catch {
      // already gone
    }
    this.setState("stopped");
  }

  private async startClient(): Promise<void> {
    const { settings, problems } = settingsFor();
    this.settings = settings;
    this.reportSettingProblems(problems);
    if (!settings.enable) {
      this.current = {};
      this.setState("disabled");
      this.output.info("torchdoctor.enable is off: the server is not started.");
      return;
    }
    this.setState("starting");

    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri).filter((u) => u.scheme === "file");
    const inspected = vscode.workspace.getConfiguration(SECTION, folders[0]).inspect("interpreter");
    const trusted = vscode.workspace.isTrusted;
    // Untrusted: VS Code hides the workspace's value; read it (as data) to tell the user it is ignored.
    const hidden = trusted
      ? undefined
      : workspaceInterpreterSetting([
          ...folders.map((u) => vscode.Uri.joinPath(u, ".vscode", "settings.json").fsPath),
          ...(vscode.workspace.workspaceFile?.scheme === "file" ? [vscode.workspace.workspaceFile.fsPath] : []),
        ]);
    const resolution = await resolveInterpreter({
      setting: {
        globalValue: inspected?.globalValue,
        workspaceValue: inspected?.workspaceValue ?? hidden,
        workspaceFolderValue: inspected?.workspaceFolderValue,
      },
      trusted,
      workspaceFolders: folders.map((u) => u.fsPath),
      ...(isPythonExtensionInstalled() ? { pythonExtension: () => selectedInterpreter(folders[0]) } : {}),
    });
    for (const note of resolution.notes) {
      if (!resolution.settingProblems.includes(note)) this.output.info(note);
    }
    this.reportSettingProblems(resolution.settingProblems);
    if (resolution.untrustedNotice !== undefined) {
      this.showOnce(`untrusted:${resolution.untrustedNotice}`, {
        severity: "warning",
        text: resolution.untrustedNotice,
        actions: ["showOutput"],
      });
    }
    if (!resolution.ok) {
      this.current = {};
      this.setState("error", "No Python interpreter found");
      this.showOnce("noInterpreter", noInterpreterMessage());
      return;
    }

    this.current = { python: resolution.command, source: resolution.source };
    this.output.info(`Interpreter: ${resolution.command} (from ${resolution.source}).`);
    let result = await probe(resolution.command, this.processCwd);
    if (!result.ok && (result.kind === "notInstalled" || result.kind === "serverMissing")) {
      // An environment created earlier by "Install torchdoctor" serves when the chosen one lacks it.
      const managed = this.context.globalState.get<string>(MANAGED_ENV_KEY);
      if (managed !== undefined && fs.existsSync(managed)) {
        const managedResult = await probe(managed, this.processCwd);
        if (managedResult.ok) {
          this.output.info(`torchdoctor is not installed in ${resolution.command}; using its own environment ${managed}.`);
          this.current = { python: managed, source: resolution.source };
          result = managedResult;
        }
      }
    }
    if (!result.ok) {
      if (result.info !== undefined) this.current.info = result.info;
      this.output.warn(`Cannot start the server with ${resolution.command}: ${result.kind}: ${result.detail}`);
      const notInstalled = result.kind === "notInstalled" || result.kind === "serverMissing";
      this.setState(notInstalled ? "notInstalled" : "error", result.detail);
      this.showOnce(`${result.kind}:${resolution.command}`, probeFailureMessage(result.kind, resolution.command, result.detail));
      return;
    }
    this.current.info = result.info;
    const python = this.current.python ?? resolution.command;
    this.output.info(`Starting ${python} ${serverArgs().join(" ")} (torchdoctor ${result.info.torchdoctor ?? "?"}).`);

    const client = this.createClient(python);
    this.client = client;
    client.onDidChangeState((event) => {
      if (this.client !== client) return;
      if (event.newState === State.Running) this.setState("running");
      else if (event.newState === State.Starting) this.setState("starting");
      else if (event.newState === State.Stopped && this.state === "running") this.setState("stopped");
    });
    try {
      await client.start();
      // After the client's own listeners: by then it counts the new notebook tab as visible.
      const refresh = (): void => {
        if (this.client === client && client.isRunning()) client.getFeature(DocumentDiagnosticRequest.method).refresh();
      };
      this.clientListeners = this.cells.refreshOnNotebooks(refresh);
      this.setState("running");
    } catch (err) {
      this.output.error(`The server failed to start: ${errorText(err)}`);
      this.setState("error", errorText(err));
      this.showOnce(`startFailed:${python}`, {
        severity: "error",
        text: t("torchdoctor's language server failed to start with {0}.", python),
        actions: ["showOutput", "restart"],
      });
    }
  }

  private createClient(python: string): LanguageClient {
    const serverOptions: ClientServerOptions = {
      command: python,
      args: serverArgs(),
      options: { cwd: this.processCwd, env: pythonEnv() },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
        { scheme: "vscode-notebook-cell", language: "python" },
      ],
      outputChannel: this.output,
      // Not the name of the pull diagnostics' collection (the server's identifier, "torchdoctor"):
      // VS Code warns when two collections share a name.
      diagnosticCollectionName: "torchdoctor.push",
      stdioOptions: {
        stdout: (input, channel) => {
          readline.createInterface({ input, crlfDelay: Infinity }).on("line", (line) => {
            channel.info(line);
          });
        },
        stderr: (input, channel) => {
          readline.createInterface({ input, crlfDelay: Infinity }).on("line", (line) => {
            channel[stderrLevel(line)](line);
          });
        },
      },
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      // `trusted` travels only at start-up (the server never takes it from workspace settings);
      // the client restarts when trust is granted.
      initializationOptions: () => ({
        ...toServerOptions(settingsFor().settings),
        trusted: vscode.workspace.isTrusted,
      }),
      markdown: { isTrusted: false, supportHtml: false },
      initializationFailedHandler: (error) => {
        this.output.error(`Initialization failed: ${errorText(error)}`);
        return false;
      },
      errorHandler: {
        error: (_error, _message, count) => ({
          action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown,
          handled: true,
        }),
        closed: () => {
          if (this.crashes.record(Date.now()) === "restart") {
            this.output.warn("The server stopped; starting it again.");
            return { action: CloseAction.Restart, handled: true };
          }
          this.setState("error", "The server stopped repeatedly");
          this.showOnce("crashed", crashedMessage());
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
      middleware: {
        provideDiagnostics: this.cells.provideDiagnostics,
        workspace: {
          configuration: async (params, token, next) => {
            const answer = await next(params, token);
            if (!Array.isArray(answer)) return answer;
            return params.items.map((item, i) => {
              if (item.section !== SECTION) return answer[i] as unknown;
              const scope = item.scopeUri !== undefined ? vscode.Uri.parse(item.scopeUri) : undefined;
              return toServerOptions(settingsFor(scope).settings);
            });
          },
        },
        provideCodeActions: async (document, range, context, token, next) => {
          const actions = await next(document, range, context, token);
          const automatic = context.triggerKind === vscode.CodeActionTriggerKind.Automatic;
          if (this.settings.fixAll || !automatic || actions === null || actions === undefined) return actions;
          // torchdoctor.fixAll off: no source.fixAll.torchdoctor on save or in the light bulb;
          // explicit requests (the Fix All command, the Source Action menu) still get it.
          return actions.filter((a) => !(a instanceof vscode.CodeAction && isFixAllKind(a.kind)));
        },
      },
    };
    return new LanguageClient("torchdoctor", "torchdoctor", serverOptions, clientOptions);
  }

  /** Logs each problem with the settings, and tells the user of each once. */
  private reportSettingProblems(problems: readonly string[]): void {
    for (const problem of problems) {
      this.output.warn(problem);
      this.showOnce(`setting:${problem}`, settingProblemMessage(problem));
    }
  }

  showOnce(key: string, message: UserMessage): void {
    if (this.shownMessages.has(key)) return;
    this.shownMessages.add(key);
    void this.show(message);
  }

  private async show(message: UserMessage): Promise<void> {
    this.messages.push(message.text);
    const titles = message.actions.map(actionTitle);
    const show =
      message.severity === "error"
        ? vscode.window.showErrorMessage
        : message.severity === "warning"
          ? vscode.window.showWarningMessage
          : vscode.window.showInformationMessage;
    const picked = await show(message.text, ...titles);
    const action = message.actions.find((a) => actionTitle(a) === picked);
    if (action !== undefined) await this.runAction(action);
  }

  async runAction(action: Action): Promise<void> {
    switch (action) {
      case "install":
        await this.install();
        return;
      case "selectInterpreter":
        if (isPythonExtensionInstalled()) await vscode.commands.executeCommand("python.setInterpreter");
        else await vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.interpreter`);
        return;
      case "openSettings":
        await vscode.commands.executeCommand("workbench.action.openSettings", `@ext:${this.context.extension.id}`);
        return;
      case "showOutput":
        this.output.show();
        return;
      case "restart":
        await this.restart();
        return;
    }
  }

  /** Installs torchdoctor into the current interpreter (or, where that is not allowed, into an environment of the extension's own). */
  async install(): Promise<void> {
    const python = this.current.python;
    if (python === undefined) {
      this.showOnce("noInterpreter", noInterpreterMessage());
      return;
    }
    const bundledDir = vscode.Uri.joinPath(this.context.extensionUri, "bundled").fsPath;
    const wheels = fs.existsSync(bundledDir) ? fs.readdirSync(bundledDir) : [];
    const target = installTarget(wheels, bundledDir);
    const log = (text: string): void => { this.output.append(text); };

    const ok = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: t("Installing torchdoctor"), cancellable: false },
      async (progress) => {
        progress.report({ message: t("into {0}", python) });
        this.output.info(`Running ${python} ${pipInstallArgs(target).join(" ")}`);
        const first = await run(python, pipInstallArgs(target), { cwd: this.processCwd, env: pythonEnv(), timeoutMs: 10 * 60_000, onOutput: log });
        if (first.code === 0) return true;
        const kind = classifyPipFailure(first.stdout + first.stderr + (first.spawnError?.message ?? ""));
        if (kind !== "externallyManaged" && kind !== "noPip") {
          this.output.error(`pip failed (${kind}).`);
          return false;
        }
        // The system manages this Python (PEP 668) or it has no pip: use a private environment.
        const venvDir = vscode.Uri.joinPath(this.context.globalStorageUri, "python-env").fsPath;
        progress.report({ message: t("into an environment of its own") });
        fs.mkdirSync(this.context.globalStorageUri.fsPath, { recursive: true });
        this.output.info(`${python} does not allow installing packages; creating ${venvDir}.`);
        const venv = await run(python, ["-m", "venv", "--clear", venvDir], { cwd: this.processCwd, env: pythonEnv(), timeoutMs: 5 * 60_000, onOutput: log });
        const managed = venvPython(venvDir);
        if (venv.code !== 0 || !fs.existsSync(managed)) {
          this.output.error("Could not create a virtual environment (on Debian/Ubuntu: apt install python3-venv).");
          return false;
        }
        const second = await run(managed, pipInstallArgs(target), { cwd: this.processCwd, env: pythonEnv(), timeoutMs: 10 * 60_000, onOutput: log });
        if (second.code !== 0) return false;
        await this.context.globalState.update(MANAGED_ENV_KEY, managed);
        return true;
      },
    );
    if (ok) {
      void vscode.window.showInformationMessage(t("torchdoctor is installed; starting its server."));
      this.shownMessages.clear();
      await this.restart();
    } else {
      const picked = await vscode.window.showErrorMessage(
        t("Installing torchdoctor into {0} failed. The output has pip's messages.", python),
        actionTitle("showOutput"),
        actionTitle("selectInterpreter"),
      );
      if (picked === actionTitle("showOutput")) this.output.show();
      else if (picked === actionTitle("selectInterpreter")) await this.runAction("selectInterpreter");
    }
  }

  /** Applies every fix torchdoctor offers for the document (the `source.fixAll.torchdoctor` action). */
  async fixAll(editor: vscode.TextEditor | undefined): Promise<boolean> {
    const client = this.client;
    if (editor === undefined) return false;
    if (client === undefined || client.state !== State.Running) {
      void vscode.window.showWarningMessage(t("torchdoctor's server is not running."));
      return false;
    }
    const document = editor.document;
    const fullRange = new vscode.Range(0, 0, document.lineCount, 0);
    const actions = await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[] | undefined>(
      "vscode.executeCodeActionProvider",
      document.uri,
      fullRange,
      FIX_ALL_KIND.value,
      1,
    );
    const fixAll = (actions ?? []).find(
      (a): a is vscode.CodeAction => a instanceof Object && "kind" in a && a.kind !== undefined && FIX_ALL_KIND.contains(a.kind),
    );
    if (fixAll === undefined) {
      void vscode.window.setStatusBarMessage(t("torchdoctor: nothing to fix"), 3000);
      return false;
    }
    let applied = true;
    if (fixAll.edit !== undefined) applied = await vscode.workspace.applyEdit(fixAll.edit);
    if (fixAll.command !== undefined) {
      await vscode.commands.executeCommand(fixAll.command.command, ...((fixAll.command.arguments ?? []) as unknown[]));
    }
    return applied;
  }

  /** Opens the documentation of a rule: the one given, the one under the cursor, or one picked. */
  async openRuleDocs(code?: unknown): Promise<void> {
    const ours = (d: vscode.Diagnostic): boolean => d.source === "torchdoctor";
    const codeOf = (d: vscode.Diagnostic): { value: string; target?: vscode.Uri } | undefined => {
      if (d.code === undefined) return undefined;
      if (typeof d.code === "object") return { value: String(d.code.value), target: d.code.target };
      return { value: String(d.code) };
    };
    let pick: { value: string; target?: vscode.Uri } | undefined;
    if (typeof code === "string" && code.trim() !== "") {
      pick = { value: code.trim() };
    } else {
      const editor = vscode.window.activeTextEditor;
      const diagnostics = editor !== undefined ? vscode.languages.getDiagnostics(editor.document.uri).filter(ours) : [];
      const atCursor = editor !== undefined ? diagnostics.filter((d) => d.range.contains(editor.selection.active)) : [];
      const candidates = new Map<string, { value: string; target?: vscode.Uri }>();
      for (const d of atCursor.length > 0 ? atCursor : diagnostics) {
        const c = codeOf(d);
        if (c !== undefined && !candidates.has(c.value)) candidates.set(c.value, c);
      }
      if (candidates.size === 1) {
        pick = [...candidates.values()][0];
      } else {
        const items = [...candidates.values()].map((c) => ({ label: c.value, code: c }));
        const chosen = await vscode.window.showQuickPick(
          [...items, { label: t("All rules"), code: { value: "" } }],
          { placeHolder: t("Open the documentation of which rule?") },
        );
        pick = chosen?.code;
      }
    }
    if (pick === undefined) return;
    const target = pick.target ?? vscode.Uri.parse(ruleDocsUrl(pick.value, this.settings.docsBaseUrl));
    await vscode.env.openExternal(target);
  }

  dispose(): Promise<void> {
    if (this.restartTimer !== undefined) clearTimeout(this.restartTimer);
    return this.stop();
  }
}

let instance: Torchdoctor | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<TorchdoctorApi> {
  setTranslator((template, ...args) => vscode.l10n.t(template, ...args));
  const td = new Torchdoctor(context);
  instance = td;
  let hadPython = isPythonExtensionInstalled();
  context.subscriptions.push(
    vscode.commands.registerCommand("torchdoctor.restart", () => td.restart()),
    vscode.commands.registerCommand("torchdoctor.showOutput", () => td.runAction("showOutput")),
    vscode.commands.registerCommand("torchdoctor.fixAll", () => td.fixAll(vscode.window.activeTextEditor)),
    vscode.commands.registerCommand("torchdoctor.openRuleDocs", (code?: unknown) => td.openRuleDocs(code)),
    vscode.commands.registerCommand("torchdoctor.installServer", () => td.install()),
    vscode.workspace.onDidChangeConfiguration((e) => { td.onConfigurationChanged(e); }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => { td.scheduleRestart("the workspace is now trusted"); }),
    vscode.workspace.onDidChangeWorkspaceFolders(() => { td.scheduleRestart("workspace folders changed"); }),
    vscode.extensions.onDidChange(() => {
      // The Python extension was installed or removed: its interpreter may take over.
      const now = isPythonExtensionInstalled();
      if (now !== hadPython) td.scheduleRestart(now ? "the Python extension was installed" : "the Python extension was removed");
      hadPython = now;
    }),
  );
  const subscription = await onInterpreterChange(() => { td.scheduleRestart("the Python extension's interpreter changed"); }).catch(
    () => undefined,
  );
  if (subscription !== undefined) context.subscriptions.push(subscription);
  void td.restart();
  return td;
}

export async function deactivate(): Promise<void> {
  await instance?.dispose();
  instance = undefined;
}
