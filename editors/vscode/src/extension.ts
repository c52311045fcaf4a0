// Entry point. Activation is cheap on purpose: the server (and with it the model) is only started
// once a document in one of the configured languages is open, or a DG command is run, because
// loading a diffusion model costs seconds and memory that a window without such files should not pay.
import * as vscode from 'vscode';

import { ServerManager } from './client';
import { registerCommands } from './commands';
import * as config from './config';
import { DraftRenderer } from './drafts';
import { NextEditController } from './nextEdit';
import { StatusBar } from './status';

let manager: ServerManager | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('DG', { log: true });
  const status = new StatusBar();
  const drafts = new DraftRenderer(config.draftsEnabled);
  manager = new ServerManager(output, status, drafts);
  const server = manager;
  context.subscriptions.push(output, status, drafts, server);

  const nextEdit = new NextEditController(server);
  context.subscriptions.push(nextEdit);
  registerCommands(context, server, drafts, output, nextEdit);
  updateLanguageContext();

  const wanted = (document: vscode.TextDocument) =>
    (document.uri.scheme === 'file' || document.uri.scheme === 'untitled') &&
    config.languages().includes(document.languageId);

  const startIfWanted = (document: vscode.TextDocument) => {
    if (wanted(document)) {
      server.autoStart();
    }
  };

  context.subscriptions.push(
    vscode.workspace.onDidOpenTextDocument(startIfWanted),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (event.affectsConfiguration(`${config.SECTION}.languages`)) {
        updateLanguageContext();
      }
      if (event.affectsConfiguration(`${config.SECTION}.drafts`) && !config.draftsEnabled()) {
        drafts.clear();
      }
      // Other settings reach the running server through didChangeConfiguration; these two are
      // fixed in the running client, so restart — but only if a server is up or starting.
      if (!config.needsRestart(event)) {
        return;
      }
      if (server.active) {
        await server.restart();
      } else {
        // The user may just have fixed the path that made the last start fail: try again.
        server.unblockAutoStart();
        vscode.workspace.textDocuments.forEach(startIfWanted);
      }
    }),
  );

  vscode.workspace.textDocuments.forEach(startIfWanted);
}

export async function deactivate(): Promise<void> {
  // Returning the promise lets VS Code wait for a clean `shutdown`/`exit` so no orphaned Python
  // process keeps the model in memory.
  await manager?.stop();
  manager = undefined;
}

/** Mirrors `dgLsp.languages` into a context key for the `when` clauses in package.json. */
function updateLanguageContext(): void {
  void vscode.commands.executeCommand('setContext', 'dgLsp.languages', config.languages());
}
