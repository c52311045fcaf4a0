// The `dgLsp.*` commands. Editing commands are thin: they describe *where* to work (uri, range or
// position, mode) and the server does the work and applies the edit itself through
// workspace/applyEdit, so the same behaviour is available to every LSP editor, not just VS Code.
import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  type LanguageClient,
  LSPErrorCodes,
  ResponseError,
  State,
} from 'vscode-languageclient/node';

import { errorText, type ServerManager } from './client';
import * as config from './config';
import type { DraftRenderer } from './drafts';
import type { NextEditController } from './nextEdit';
import { formatLatency } from './status';

export type InfillMode = 'fim' | 'holes' | 'body' | 'rewrite';

/** Reply of `dg.infill` and `dg.rewriteParagraph`. */
interface EditResult {
  applied: boolean;
  message?: string;
  latencyMs?: number;
}

/** Reply of `dg.status`; every field is optional here because older servers may omit some. */
interface ServerStatus {
  state?: string;
  model?: string;
  device?: string;
  dtype?: string;
  quantization?: string;
  precision?: string;
  parameters?: number;
  memoryBytes?: number;
  lastLatencyMs?: Record<string, number>;
  error?: string;
  [key: string]: unknown;
}

export function registerCommands(
  context: vscode.ExtensionContext,
  manager: ServerManager,
  drafts: DraftRenderer,
  output: vscode.LogOutputChannel,
  nextEdit: NextEditController,
): void {
  const editorCommand = (id: string, run: (editor: vscode.TextEditor) => Promise<void>) =>
    vscode.commands.registerCommand(id, async () => {
      const editor = vscode.window.activeTextEditor;
      if (!editor) {
        void vscode.window.showInformationMessage('DG: open a file in the editor first.');
        return;
      }
      await run(editor);
    });

  context.subscriptions.push(
    editorCommand('dgLsp.fillHere', (editor) =>
      // With a selection, the selection is the hole to fill; otherwise the hole is empty and sits
      // at the cursor.
      infill(manager, drafts, editor, 'fim', editor.selection, 'DG: filling in the middle…'),
    ),
    editorCommand('dgLsp.fillHoles', (editor) => {
      // The whole document unless the user narrowed it down with a selection.
      const document = editor.document;
      const range = editor.selection.isEmpty
        ? new vscode.Range(document.positionAt(0), document.positionAt(document.getText().length))
        : editor.selection;
      return infill(manager, drafts, editor, 'holes', range, 'DG: filling the holes…');
    }),
    editorCommand('dgLsp.completeBody', (editor) =>
      infill(manager, drafts, editor, 'body', editor.selection, 'DG: completing the body…'),
    ),
    editorCommand('dgLsp.rewriteSelection', async (editor) => {
      if (editor.selection.isEmpty) {
        void vscode.window.showInformationMessage('DG: select the text to rewrite first.');
        return;
      }
      const instruction = await vscode.window.showInputBox({
        title: 'DG: Rewrite selection',
        prompt: 'Optional instruction, e.g. "make it iterative" (leave empty for a plain rewrite)',
        placeHolder: 'Instruction (optional)',
        ignoreFocusOut: true,
      });
      if (instruction === undefined) {
        return; // Escape: the user changed their mind; an empty string is a valid answer.
      }
      await infill(manager, drafts, editor, 'rewrite', editor.selection, 'DG: rewriting the selection…', instruction.trim());
    }),
    editorCommand('dgLsp.rewriteParagraph', async (editor) => {
      const client = await manager.ensureStarted();
      if (!client) {
        return;
      }
      await runEdit(client, drafts, 'DG: rewriting the paragraph…', 'dg.rewriteParagraph', {
        uri: client.code2ProtocolConverter.asUri(editor.document.uri),
        position: client.code2ProtocolConverter.asPosition(editor.selection.active),
      });
    }),
    editorCommand('dgLsp.suggestNextEdit', async (editor) => {
      await nextEdit.suggest(editor, true);
    }),
    vscode.commands.registerCommand('dgLsp.acceptNextEdit', () => nextEdit.accept()),
    vscode.commands.registerCommand('dgLsp.dismissNextEdit', () => nextEdit.dismiss()),
    vscode.commands.registerCommand('dgLsp.learnRepository', () => learning(manager, 'dg.learnRepository')),
    vscode.commands.registerCommand('dgLsp.stopLearning', () => learning(manager, 'dg.stopLearning')),
    vscode.commands.registerCommand('dgLsp.showStatus', () => showStatus(manager, output)),
    vscode.commands.registerCommand('dgLsp.showLog', () => output.show(true)),
    vscode.commands.registerCommand('dgLsp.restartServer', async () => {
      const client = await manager.restart();
      if (client) {
        vscode.window.setStatusBarMessage('DG: server restarted', 3000);
      }
    }),
  );
}

/**
 * "Learn this repository" and its stop. The server trains in a child process and reports through
 * work-done progress, which the client shows as a notification; the reply only says whether it
 * started (or stopped), so the command returns at once.
 */
async function learning(manager: ServerManager, command: 'dg.learnRepository' | 'dg.stopLearning'): Promise<void> {
  const client = await manager.ensureStarted();
  if (!client) {
    return;
  }
  const argument: Record<string, unknown> = {};
  if (command === 'dg.learnRepository') {
    const document = vscode.window.activeTextEditor?.document;
    const folder = (document && vscode.workspace.getWorkspaceFolder(document.uri)) ?? vscode.workspace.workspaceFolders?.[0];
    if (folder) {
      argument.folder = folder.uri.toString();
    }
    argument.minutes = config.learningMinutes();
  }
  try {
    const reply = (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [argument] })) as
      | { started?: boolean; stopped?: boolean; message?: string }
      | null;
    const ok = reply?.started ?? reply?.stopped ?? false;
    const text = `DG: ${reply?.message ?? 'no answer'}`;
    void (ok ? vscode.window.showInformationMessage(text) : vscode.window.showWarningMessage(text));
  } catch (error) {
    void vscode.window.showErrorMessage(`DG: ${errorText(error)}`);
  }
}

async function infill(
  manager: ServerManager,
  drafts: DraftRenderer,
  editor: vscode.TextEditor,
  mode: InfillMode,
  range: vscode.Range,
  title: string,
  instruction?: string,
): Promise<void> {
  const client = await manager.ensureStarted();
  if (!client) {
    return;
  }
  const c2p = client.code2ProtocolConverter;
  await runEdit(client, drafts, title, 'dg.infill', {
    uri: c2p.asUri(editor.document.uri),
    range: c2p.asRange(range),
    mode,
    // Only sent when the user typed something, so the server can tell "no instruction" apart.
    ...(instruction ? { instruction } : {}),
  });
}

async function runEdit(
  client: LanguageClient,
  drafts: DraftRenderer,
  title: string,
  command: string,
  argument: object,
): Promise<void> {
  drafts.reset();
  try {
    await runEditWithProgress(client, title, command, argument);
  } finally {
    drafts.reset();
  }
}

async function runEditWithProgress(
  client: LanguageClient,
  title: string,
  command: string,
  argument: object,
): Promise<void> {
  // The notification's Cancel button is wired to the request's token, so cancelling sends
  // $/cancelRequest and the server can stop denoising instead of finishing work nobody wants.
  await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title, cancellable: true },
    async (_progress, token) => {
      let result: unknown;
      try {
        result = await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [argument] }, token);
      } catch (error) {
        if (token.isCancellationRequested || isCancellation(error)) {
          return;
        }
        const what = title.replace(/…$/, '');
        // A dropped connection reports only "pending response rejected"; say what happened.
        const why =
          client.state === State.Running
            ? errorText(error)
            : 'the server stopped while working on it (see "DG: Show log")';
        void vscode.window.showErrorMessage(`${what} failed: ${why}`);
        return;
      }
      if (token.isCancellationRequested) {
        return;
      }
      reportEdit(result);
    },
  );
}

function reportEdit(result: unknown): void {
  const r = (typeof result === 'object' && result !== null ? result : {}) as Partial<EditResult>;
  if (r.applied === true) {
    const latency = formatLatency(r.latencyMs);
    vscode.window.setStatusBarMessage(latency ? `DG: done in ${latency}` : 'DG: done', 4000);
    return;
  }
  void vscode.window.showWarningMessage(
    typeof r.message === 'string' && r.message !== '' ? `DG: ${r.message}` : 'DG: the server made no change.',
  );
}

function isCancellation(error: unknown): boolean {
  return (
    error instanceof ResponseError &&
    (error.code === LSPErrorCodes.RequestCancelled || error.code === LSPErrorCodes.ServerCancelled)
  );
}

// ----- DG: Show status -------------------------------------------------------------------------

type StatusItem = vscode.QuickPickItem & { action?: () => unknown };

async function showStatus(manager: ServerManager, output: vscode.LogOutputChannel): Promise<void> {
  const actions: StatusItem[] = [
    { label: '', kind: vscode.QuickPickItemKind.Separator },
    { label: '$(debug-restart) Restart server', action: () => vscode.commands.executeCommand('dgLsp.restartServer') },
    { label: '$(output) Show log', action: () => output.show(true) },
    { label: '$(gear) Open settings', action: () => config.openSettings() },
  ];

  const client = manager.running;
  let items: StatusItem[];
  if (!client) {
    items = manager.active
      ? [{ label: '$(loading~spin) Starting', detail: 'The dg-lsp server is starting; ask again in a moment.' }]
      : [{ label: '$(circle-slash) Not running', detail: 'The dg-lsp server is not running. Restart it or check the log.' }];
  } else {
    try {
      const status = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: 'DG: asking the server for its status' },
        () => client.sendRequest(ExecuteCommandRequest.type, { command: 'dg.status', arguments: [] }),
      );
      items = statusItems(status);
      actions.splice(1, 0, {
        label: '$(copy) Copy status as JSON',
        action: () => vscode.env.clipboard.writeText(JSON.stringify(status, null, 2)),
      });
    } catch (error) {
      items = [{ label: '$(error) Status request failed', detail: errorText(error) }];
    }
  }

  const picked = await vscode.window.showQuickPick([...items, ...actions], {
    title: 'DG language server',
    placeHolder: 'Status of the dg-lsp server; pick an action below',
    matchOnDescription: true,
  });
  await picked?.action?.();
}

/** One read-only row per field, in a fixed, readable order; unknown fields are kept, at the end. */
export function statusItems(raw: unknown): StatusItem[] {
  const s = (typeof raw === 'object' && raw !== null ? raw : {}) as ServerStatus;
  const rows: StatusItem[] = [];
  const row = (label: string, value: string | undefined) => {
    if (value !== undefined && value !== '') {
      rows.push({ label, description: value });
    }
  };
  const icon = s.state === 'ready' ? '$(check)' : s.state === 'error' ? '$(error)' : '$(loading~spin)';
  row(`${icon} State`, asText(s.state));
  row('$(error) Error', asText(s.error));
  row('Model', asText(s.model));
  row('Device', asText(s.device));
  row('Dtype', asText(s.dtype));
  row('Quantization', asText(s.quantization));
  if (s.precision) row('Precision', asText(s.precision));
  row('Parameters', typeof s.parameters === 'number' ? formatCount(s.parameters) : asText(s.parameters));
  row('Memory', typeof s.memoryBytes === 'number' ? formatBytes(s.memoryBytes) : asText(s.memoryBytes));
  if (typeof s.lastLatencyMs === 'object' && s.lastLatencyMs !== null) {
    for (const [kind, ms] of Object.entries(s.lastLatencyMs)) {
      row(`Last latency: ${kind}`, formatLatency(typeof ms === 'number' ? ms : undefined) ?? asText(ms));
    }
  } else if (typeof s.lastLatencyMs === 'number') {
    row('Last latency', formatLatency(s.lastLatencyMs));
  }
  const known = new Set(['state', 'error', 'model', 'device', 'dtype', 'quantization', 'precision', 'parameters', 'memoryBytes', 'lastLatencyMs']);
  for (const [key, value] of Object.entries(s)) {
    if (!known.has(key)) {
      row(key, asText(value));
    }
  }
  return rows.length > 0 ? rows : [{ label: 'The server returned no status fields.' }];
}

function asText(value: unknown): string | undefined {
  if (value === undefined || value === null) {
    return undefined;
  }
  return typeof value === 'string' ? value : JSON.stringify(value);
}

export function formatCount(n: number): string {
  const units: Array<[number, string]> = [
    [1e9, 'B'],
    [1e6, 'M'],
    [1e3, 'K'],
  ];
  for (const [size, unit] of units) {
    if (Math.abs(n) >= size) {
      return `${(n / size).toFixed(n / size >= 100 ? 0 : 1)} ${unit}`;
    }
  }
  return String(n);
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}
