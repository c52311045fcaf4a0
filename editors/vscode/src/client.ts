// Owns the LanguageClient: finding the server executable, starting, stopping and restarting it,
// and routing the server's custom notifications (`dg/status`, `dg/draft`) to the UI.
//
// The client is recreated rather than restarted in place when settings such as the command or the
// language list change, because both are baked into a LanguageClient when it is constructed.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  type Executable,
  LanguageClient,
  type LanguageClientOptions,
  NotificationType,
  type Position as LspPosition,
  State,
} from 'vscode-languageclient/node';

import * as config from './config';
import { DraftRenderer } from './drafts';
import { isStatusParams, type StatusBar, type StatusParams } from './status';

const CLIENT_ID = 'dgLsp'; // also makes `dgLsp.trace.server` work (the client reads `<id>.trace.server`)
const CLIENT_NAME = 'DG language server';

interface DraftParams {
  uri: string;
  position: LspPosition;
  text: string;
  final: boolean;
}

const StatusNotification = new NotificationType<StatusParams>('dg/status');
const DraftNotification = new NotificationType<DraftParams>('dg/draft');

/** The process to spawn, or why none could be found. */
type Resolution =
  | { ok: true; command: string; args: string[]; display: string }
  | { ok: false; tried: string; hint: string };

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  // Shared by concurrent callers (several documents opening at once, a command racing activation)
  // so only one server process is ever started.
  private pending: Promise<LanguageClient | undefined> | undefined;
  private stopping = false;
  // Set after a failed start or a crash so that opening more files does not spawn (and pop up an
  // error for) the same broken server again and again; an explicit command, a restart or a change
  // of the server settings clears it.
  private autoStartBlocked = false;

  constructor(
    private readonly output: vscode.LogOutputChannel,
    private readonly status: StatusBar,
    private readonly drafts: DraftRenderer,
  ) {}

  /** The client if it is up and initialized. */
  get running(): LanguageClient | undefined {
    return this.client?.state === State.Running ? this.client : undefined;
  }

  /** True while a client exists or is being started, whatever its state. */
  get active(): boolean {
    return this.client !== undefined || this.pending !== undefined;
  }

  /** Starts the server unless it is already running or starting. Resolves to undefined on failure. */
  ensureStarted(): Promise<LanguageClient | undefined> {
    const running = this.running;
    if (running) {
      return Promise.resolve(running);
    }
    if (!this.pending) {
      this.pending = this.start().finally(() => {
        this.pending = undefined;
      });
    }
    return this.pending;
  }

  /** Starts the server for a newly opened document, unless an earlier attempt failed. */
  autoStart(): void {
    if (!this.autoStartBlocked && !this.running) {
      void this.ensureStarted();
    }
  }

  /** Lets autoStart try again, for instance after the user fixed the server settings. */
  unblockAutoStart(): void {
    this.autoStartBlocked = false;
  }

  async restart(): Promise<LanguageClient | undefined> {
    this.autoStartBlocked = false;
    await this.pending?.catch(() => undefined);
    await this.stop();
    return this.ensureStarted();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.drafts.clear();
    if (!client) {
      return;
    }
    this.stopping = true;
    try {
      // A model-loading server can be slow to answer `shutdown`; do not hang the window on it.
      if (client.needsStop()) {
        await client.stop(5000);
      }
    } catch (error) {
      this.output.warn(`Stopping the server failed: ${errorText(error)}`);
    } finally {
      this.stopping = false;
      this.status.setStopped();
    }
  }

  dispose(): void {
    void this.stop();
  }

  private async start(): Promise<LanguageClient | undefined> {
    // A client left over from a crash is stopped for good; drop it before making a new one.
    if (this.client) {
      await this.stop();
    }
    this.autoStartBlocked = false;
    const resolution = resolveServer();
    if (!resolution.ok) {
      this.autoStartBlocked = true;
      this.reportMissing(resolution);
      return undefined;
    }

    this.status.setStarting();
    this.output.info(`Starting ${resolution.display}`);
    const client = this.create(resolution);
    this.client = client;
    try {
      await client.start();
      return client;
    } catch (error) {
      // The process started but died, or `initialize` failed: the server's stderr is in the log.
      const message = `DG: the language server (${resolution.display}) failed to start: ${errorText(error)}`;
      this.output.error(message);
      this.status.setError(`${message}\n\nSee "DG: Show log" for the server's output.`);
      this.autoStartBlocked = true;
      if (this.client === client) {
        this.client = undefined;
      }
      void this.offerFixes(message, true);
      return undefined;
    }
  }

  private create(resolution: Extract<Resolution, { ok: true }>): LanguageClient {
    const folder = vscode.workspace.workspaceFolders?.[0];
    const executable: Executable = {
      command: resolution.command,
      args: resolution.args,
      // No `transport`: with TransportKind.stdio the client would append `--stdio` to the
      // arguments, which `dg-lsp serve` does not take; stdio is the default without it.
      options: {
        cwd: folder?.uri.scheme === 'file' ? folder.uri.fsPath : undefined,
        // Unbuffered so the server's stderr log lines show up in the output channel immediately.
        env: { ...process.env, PYTHONUNBUFFERED: '1' },
      },
    };

    const selector = config
      .languages()
      .flatMap((language) => [
        { scheme: 'file', language },
        { scheme: 'untitled', language },
      ]);

    // Declared before the options object so the middleware below can reach it.
    let client: LanguageClient | undefined;
    const options: LanguageClientOptions = {
      documentSelector: selector,
      outputChannel: this.output,
      // A function, so a restart always sends the settings as they are now.
      initializationOptions: () => config.serverSettings(),
      synchronize: { configurationSection: config.SECTION },
      middleware: {
        workspace: {
          // The client's own payload would be the raw `dgLsp` section, including the launch-only
          // `server.*` keys. Sending the cleaned object instead gives the server exactly the shape
          // it already got as initializationOptions, wrapped as `{ settings: { dgLsp: ... } }`.
          didChangeConfiguration: async () => {
            await client?.sendNotification(DidChangeConfigurationNotification.type, {
              settings: { [config.SECTION]: config.serverSettings() },
            });
          },
        },
      },
      // Retrying a failed `initialize` would reload the model again and again; report it once.
      initializationFailedHandler: () => false,
    };

    client = new LanguageClient(CLIENT_ID, CLIENT_NAME, executable, options);
    const created = client;

    created.onNotification(StatusNotification, (params: unknown) => {
      if (isStatusParams(params)) {
        this.status.update(params);
      }
    });
    created.onNotification(DraftNotification, (params: DraftParams) => {
      if (!params || typeof params.uri !== 'string' || typeof params.text !== 'string' || !params.position) {
        return;
      }
      this.drafts.show({
        // Round-trip through the converter so the string compares equal to Uri.toString() of the
        // open document even if the server re-encoded it.
        uri: created.protocol2CodeConverter.asUri(params.uri).toString(),
        position: created.protocol2CodeConverter.asPosition(params.position),
        text: params.text,
        final: params.final === true,
      });
    });
    created.onDidChangeState((event) => {
      if (this.client !== created) {
        return;
      }
      if (event.newState === State.Running && event.oldState !== State.Running) {
        // Until the server sends `dg/status` all we know is that the connection is up.
        this.status.update({ state: 'ready', message: 'Connected to the dg-lsp server.' });
      } else if (event.newState === State.Stopped && !this.stopping) {
        // The client already retried a few times before giving up; say so instead of going quiet.
        this.drafts.clear();
        this.autoStartBlocked = true;
        this.status.setError('The dg-lsp server stopped unexpectedly. See "DG: Show log".');
      }
    });
    return created;
  }

  private reportMissing(resolution: Extract<Resolution, { ok: false }>): void {
    const message = `DG: could not start the language server: ${resolution.tried}. ${resolution.hint}`;
    this.output.error(message);
    this.status.setError(message);
    void this.offerFixes(message, false);
  }

  private async offerFixes(message: string, withLog: boolean): Promise<void> {
    const settings = 'Open Settings';
    const log = 'Show Log';
    const choice = await vscode.window.showErrorMessage(
      message,
      ...(withLog ? [settings, log] : [settings]),
    );
    if (choice === settings) {
      await config.openSettings('server');
    } else if (choice === log) {
      this.output.show(true);
    }
  }
}

const INSTALL_HINT =
  'Install the server with `pip install dg-lsp` (or `pip install -e .` in the dg-lsp repository) ' +
  'inside a virtual environment, then set `dgLsp.server.command` to the `dg-lsp` executable in it ' +
  'or `dgLsp.server.python` to its Python interpreter.';

/**
 * Decides what to spawn and checks that it exists first. Spawning a missing program only yields a
 * bare ENOENT from deep inside the client, which tells the user nothing about which setting to fix.
 */
function resolveServer(): Resolution {
  const launch = config.launchSettings();
  if (launch.python) {
    const python = findExecutable(launch.python);
    if (!python) {
      return {
        ok: false,
        tried: `the Python interpreter \`${launch.python}\` from \`dgLsp.server.python\` was not found`,
        hint: INSTALL_HINT,
      };
    }
    // `server.args` still applies, so extra server flags work in both modes.
    const args = ['-m', 'dg_lsp', ...launch.args];
    return { ok: true, command: python, args, display: `${python} ${args.join(' ')}` };
  }
  const command = findExecutable(launch.command);
  if (!command) {
    const where = hasDirectory(launch.command) ? 'does not exist or is not executable' : 'was not found on PATH';
    return {
      ok: false,
      tried: `\`${launch.command}\` (from \`dgLsp.server.command\`) ${where}`,
      hint: INSTALL_HINT,
    };
  }
  return { ok: true, command, args: launch.args, display: [command, ...launch.args].join(' ') };
}

function hasDirectory(p: string): boolean {
  return p.includes('/') || p.includes('\\');
}

/** Resolves `name` the way a shell would: a path is checked directly, a bare name via PATH. */
export function findExecutable(name: string): string | undefined {
  const windows = process.platform === 'win32';
  // On Windows `dg-lsp` is really `dg-lsp.exe` (pip's console-script launcher), so try the
  // PATHEXT suffixes too; elsewhere the name is used as is.
  const suffixes = windows
    ? ['', ...(process.env['PATHEXT'] ?? '.COM;.EXE;.BAT;.CMD').split(';').filter(Boolean)]
    : [''];

  if (path.isAbsolute(name) || hasDirectory(name)) {
    const base = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? process.cwd();
    const full = path.resolve(base, name);
    return suffixes.map((s) => full + s).find(isExecutableFile);
  }
  const dirs = (process.env['PATH'] ?? '').split(path.delimiter).filter(Boolean);
  for (const dir of dirs) {
    for (const suffix of suffixes) {
      const candidate = path.join(dir, name + suffix);
      if (isExecutableFile(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

function isExecutableFile(file: string): boolean {
  try {
    if (!fs.statSync(file).isFile()) {
      return false;
    }
    // Windows has no execute bit; existence is the best available check there.
    if (process.platform !== 'win32') {
      fs.accessSync(file, fs.constants.X_OK);
    }
    return true;
  } catch {
    return false;
  }
}

export function errorText(error: unknown): string {
  if (error instanceof Error) {
    return error.message;
  }
  return typeof error === 'string' ? error : JSON.stringify(error);
}
