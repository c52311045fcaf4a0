// Owns the LanguageClient: finding the server executable, starting, stopping and restarting it,
// and routing the server's custom notifications (`dg/status`, `dg/draft`) to the UI.
//
// The client is recreated rather than restarted in place when settings such as the command or the
// language list change, because both are baked into a LanguageClient when it is constructed.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import * as vscode from 'vscode';
import {
  CloseAction,
  type CloseHandlerResult,
  DidChangeConfigurationNotification,
  ErrorAction,
  type ErrorHandler,
  type ErrorHandlerResult,
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
  // Set after a failed start or a crash so that opening more files does not spawn (and pop up an
  // error for) the same broken server again and again; an explicit command, a restart or a change
  // of the server settings clears it.
  private autoStartBlocked = false;
  // The server process of each client (replaced when the client restarts a crashed server).
  private readonly children = new WeakMap<LanguageClient, ChildProcess>();
  private queuedRestart: Promise<LanguageClient | undefined> | undefined;
  private currentRestart: Promise<LanguageClient | undefined> | undefined;
  // Bumped by every stop; a start that finds it changed was cancelled while it was in progress.
  private generation = 0;

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
      const pending: Promise<LanguageClient | undefined> = this.start().finally(() => {
        // Only clear our own promise; a restart may already have put a newer one in its place.
        if (this.pending === pending) {
          this.pending = undefined;
        }
      });
      this.pending = pending;
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

  /**
   * Restarts the server with the current settings. Requests that arrive before the restart has
   * read the settings share it (editing two settings in a row restarts once); one that arrives
   * later waits for it and then restarts again, so the newest settings always win.
   */
  restart(): Promise<LanguageClient | undefined> {
    if (this.queuedRestart) {
      return this.queuedRestart;
    }
    const previous = this.currentRestart;
    const queued = (async () => {
      await previous?.catch(() => undefined);
      this.autoStartBlocked = false;
      // Give a start in progress a moment to finish so it can be shut down cleanly, but do not
      // wait on it indefinitely: a server stuck in `initialize` is a likely reason to restart.
      if (this.pending) {
        await Promise.race([this.pending.catch(() => undefined), delay(3000)]);
      }
      this.queuedRestart = undefined;
      const current = this.stop().then(() => this.ensureStarted());
      this.currentRestart = current;
      try {
        return await current;
      } finally {
        if (this.currentRestart === current) {
          this.currentRestart = undefined;
        }
      }
    })();
    this.queuedRestart = queued;
    return queued;
  }

  async stop(): Promise<void> {
    // Anything still starting belongs to an older generation from now on and will give up (see
    // start), which is how a stop during startup leaves no server behind.
    this.generation++;
    this.pending = undefined;
    const client = this.client;
    // Cleared first: the state listener ignores events from a client that is no longer current,
    // which is how an intentional stop is told apart from a crash.
    this.client = undefined;
    this.drafts.clear();
    if (!client) {
      return;
    }
    await this.shutDown(client);
    this.status.setStopped();
  }

  dispose(): void {
    void this.stop();
  }

  private async start(): Promise<LanguageClient | undefined> {
    // A client left over from a crash is stopped for good; drop it before making a new one.
    if (this.client) {
      await this.stop();
    }
    const generation = this.generation;
    const superseded = () => generation !== this.generation;
    this.autoStartBlocked = false;
    const resolution = await resolveServer();
    if (superseded()) {
      return undefined;
    }
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
      if (superseded()) {
        // Stopped (restart, deactivation) while `initialize` was still running. A client that is
        // starting cannot be stopped, so it is stopped now that it is up.
        await this.shutDown(client);
        return undefined;
      }
      return client;
    } catch (error) {
      if (superseded()) {
        return undefined; // Failed because it was being stopped: nothing to report.
      }
      // The process started but died, or `initialize` failed: the server's stderr is in the log.
      const message =
        `DG: the language server (${resolution.display}) failed to start: ${errorText(error)}. ` +
        'Its own output is in the DG log.';
      this.output.error(message);
      this.status.setError(`${message}\n\nSee "DG: Show log" for the server's output.`);
      this.autoStartBlocked = true;
      this.client = undefined;
      void this.offerFixes(message, true);
      return undefined;
    }
  }

  /**
   * Ends a client and its server. A running server gets the LSP `shutdown`/`exit` handshake, with
   * a kill as the fallback; one still starting is killed, which makes its start fail, and the
   * superseded start() then reports nothing.
   */
  private async shutDown(client: LanguageClient): Promise<void> {
    const child = this.children.get(client);
    if (client.state === State.Starting) {
      // Disposing a starting client would only mark it disposed and make its pending start throw
      // confusing errors; ending the process is what actually stops it.
      if (child) {
        terminate(child, 0);
      }
      return;
    }
    try {
      // A server busy with a model can be slow to answer `shutdown`; do not hang on it.
      await client.dispose(5000);
    } catch (error) {
      // Expected for a client whose start failed: there is no connection left to shut down.
      this.output.debug(`Disposing the language client: ${errorText(error)}`);
    }
    if (child) {
      // It should exit by itself after `exit`; if it does not, it is ended.
      terminate(child, 2000);
    }
  }

  private create(resolution: Extract<Resolution, { ok: true }>): LanguageClient {
    // Assigned once constructed; declared first because the spawn function and the middleware
    // below refer to it (they only run after construction).
    let client: LanguageClient | undefined;

    // The process is spawned here rather than by the client (an `Executable`) so that this class
    // holds the ChildProcess: a client that is still starting cannot be stopped through the
    // client API, and a server hung in `initialize` (loading a model, say) would otherwise be left
    // running. See `shutDown`.
    const spawnServer = (): Promise<ChildProcess> =>
      new Promise((resolve, reject) => {
        const child = spawn(resolution.command, resolution.args, {
          cwd: serverCwd(),
          // Unbuffered so the server's log lines reach the output channel as they are written.
          env: { ...process.env, PYTHONUNBUFFERED: '1' },
          stdio: 'pipe',
          windowsHide: true,
        });
        let spawned = false;
        // Kept for the process's lifetime: an 'error' event without a listener would throw.
        child.on('error', (error) => {
          if (spawned) {
            this.output.warn(`Server process ${child.pid}: ${error.message}`);
          } else {
            reject(error);
          }
        });
        child.once('spawn', () => {
          spawned = true;
          if (client) {
            this.children.set(client, child);
          }
          resolve(child);
        });
        child.once('exit', (code, signal) => {
          const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
          this.output[code === 0 || signal === 'SIGTERM' ? 'info' : 'warn'](`Server process ${child.pid} ${how}.`);
        });
      });

    const selector = config
      .languages()
      .flatMap((language) => [
        { scheme: 'file', language },
        { scheme: 'untitled', language },
      ]);

    const crashPolicy = new CrashPolicy();
    // Set by the first `dg/status`; from then on the server's own report is shown, not ours.
    let serverReported = false;
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
            // A change to `server.*` or `languages` restarts the server, and the restart may
            // already be stopping this client; sending would then try to start it again.
            if (client?.state !== State.Running) {
              return;
            }
            try {
              await client.sendNotification(DidChangeConfigurationNotification.type, {
                settings: { [config.SECTION]: config.serverSettings() },
              });
            } catch (error) {
              // The replacement client sends the new settings as initializationOptions anyway.
              if (client.state === State.Running) {
                throw error;
              }
            }
          },
        },
      },
      // Retrying a failed `initialize` would reload the model again and again; report it once.
      initializationFailedHandler: () => false,
      errorHandler: crashPolicy,
      // The client logs every stderr line as an error, but a Python server writes all of its
      // logging to stderr; keep the levels it printed so the log stays readable.
      stdioOptions: {
        stdout: (input, channel) => forwardLines(input, (line) => channel.info(line)),
        stderr: (input, channel) => {
          let level = logLevelOf('');
          forwardLines(input, (line) => {
            level = logLevelOf(line, level);
            channel[level](line);
          });
        },
      },
    };

    client = new LanguageClient(CLIENT_ID, CLIENT_NAME, spawnServer, options);
    const created = client;

    created.onNotification(StatusNotification, (params: unknown) => {
      if (isStatusParams(params)) {
        serverReported = true;
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
        // Also after the client's own automatic restart following a crash.
        this.autoStartBlocked = false;
        crashPolicy.markRunning();
        // Until the server sends `dg/status` all we know is that the connection is up. (The
        // notification can be handled before this event, so do not overwrite it.)
        if (!serverReported) {
          this.status.update({ state: 'ready', message: 'Connected to the dg-lsp server.' });
        }
      } else if (event.newState === State.Stopped) {
        // The server went away without us asking. The client restarts it a few times on its own
        // (then this is followed by Running); if it gives up, this error stays.
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
async function resolveServer(): Promise<Resolution> {
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
    if ((await probeModule(python)) === 'missing') {
      return {
        ok: false,
        tried: `the Python interpreter \`${python}\` (from \`dgLsp.server.python\`) has no \`dg_lsp\` module`,
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

/**
 * Asks the interpreter whether `dg_lsp` is importable, without importing it (which would pull in
 * torch and take seconds). Anything other than a clear "no" — a timeout, a broken interpreter —
 * is left for the real start to report, with the server's own output in the log.
 */
function probeModule(python: string): Promise<'present' | 'missing' | 'unknown'> {
  const script = 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec("dg_lsp") else 3)';
  return new Promise((resolve) => {
    execFile(python, ['-c', script], { cwd: serverCwd(), timeout: 15_000, windowsHide: true }, (error) => {
      if (!error) {
        resolve('present');
      } else {
        resolve(error.code === 3 ? 'missing' : 'unknown');
      }
    });
  });
}

/** The server runs in the first workspace folder, so a `-m dg_lsp` from a checkout works too. */
function serverCwd(): string | undefined {
  const folder = vscode.workspace.workspaceFolders?.[0];
  return folder?.uri.scheme === 'file' ? folder.uri.fsPath : undefined;
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
    // Relative paths are taken from where the server will run, the first workspace folder.
    const base = serverCwd() ?? process.cwd();
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

/**
 * What to do when the connection breaks. The client's default handler restarts the server up to
 * five times in three minutes, each with an error pop-up, even when the server never got as far as
 * answering `initialize`; a server that cannot start (missing module, bad arguments, model that
 * fails to load) would then be spawned again and again. Here a server that was never running is
 * not restarted (the start failure is reported by ServerManager.start), and one that crashes
 * later is restarted quietly a few times before giving up with one message.
 */
class CrashPolicy implements ErrorHandler {
  private static readonly maxRestarts = 3;
  private static readonly windowMs = 3 * 60 * 1000;
  private wasRunning = false;
  private restarts: number[] = [];

  markRunning(): void {
    this.wasRunning = true;
  }

  error(_error: Error, _message: unknown, count: number | undefined): ErrorHandlerResult {
    if (!this.wasRunning) {
      return { action: ErrorAction.Shutdown, handled: true };
    }
    // A few read/write errors can be transient; persistent ones end the connection.
    return count !== undefined && count <= 3
      ? { action: ErrorAction.Continue, handled: true }
      : { action: ErrorAction.Shutdown, handled: true };
  }

  closed(): CloseHandlerResult {
    if (!this.wasRunning) {
      return { action: CloseAction.DoNotRestart, handled: true };
    }
    const now = Date.now();
    this.restarts = this.restarts.filter((t) => now - t < CrashPolicy.windowMs);
    this.restarts.push(now);
    if (this.restarts.length > CrashPolicy.maxRestarts) {
      return {
        action: CloseAction.DoNotRestart,
        message:
          `DG: the dg-lsp server stopped ${this.restarts.length} times within three minutes and will not ` +
          'be restarted automatically. See "DG: Show log" for its output, then run "DG: Restart server".',
      };
    }
    return { action: CloseAction.Restart, handled: true };
  }
}

type LineLevel = 'error' | 'warn' | 'info' | 'debug';

/**
 * Level of one stderr line from the server. Lines that name a level (Python's logging does) use
 * it; indented lines and the lines of a traceback keep the level of the line before, so a
 * multi-line error is not split across levels.
 */
export function logLevelOf(line: string, previous: LineLevel = 'info'): LineLevel {
  const named = /\b(CRITICAL|FATAL|ERROR|WARNING|WARN|INFO|DEBUG)\b/.exec(line)?.[1];
  switch (named) {
    case 'CRITICAL':
    case 'FATAL':
    case 'ERROR':
      return 'error';
    case 'WARNING':
    case 'WARN':
      return 'warn';
    case 'INFO':
      return 'info';
    case 'DEBUG':
      return 'debug';
  }
  if (line.startsWith('Traceback ')) {
    return 'error';
  }
  if (/^\s/.test(line) || /^[A-Za-z_.]+(Error|Exception)\b/.test(line)) {
    return previous;
  }
  return 'info';
}

function forwardLines(input: Readable, write: (line: string) => void): void {
  createInterface({ input, crlfDelay: Infinity, terminal: false }).on('line', write);
}

/** Ends `child` after `graceMs` unless it has exited by then: SIGTERM, then SIGKILL. */
function terminate(child: ChildProcess, graceMs: number): void {
  const alive = () => child.exitCode === null && child.signalCode === null;
  setTimeout(() => {
    if (!alive()) {
      return;
    }
    child.kill();
    setTimeout(() => {
      if (alive()) {
        child.kill('SIGKILL');
      }
    }, 2000).unref();
  }, graceMs).unref();
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function errorText(error: unknown): string {
  if (error instanceof Error) {
    return error.message;
  }
  return typeof error === 'string' ? error : JSON.stringify(error);
}
