// The status bar item. It reflects two sources: the client's own lifecycle (starting, failed to
// start, stopped) and the server's `dg/status` notification, which is the only way to know that
// the model is still loading — the LSP connection is up long before the weights are.
import * as vscode from 'vscode';

export type ServerState = 'loading' | 'ready' | 'error';

/** Params of the server's `dg/status` notification. */
export interface StatusParams {
  state: ServerState;
  message?: string;
  lastLatencyMs?: number;
}

export const SHOW_STATUS_COMMAND = 'dgLsp.showStatus';

export function isStatusParams(value: unknown): value is StatusParams {
  if (typeof value !== 'object' || value === null) {
    return false;
  }
  const state = (value as { state?: unknown }).state;
  return state === 'loading' || state === 'ready' || state === 'error';
}

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;

  constructor() {
    // Right side, like other language-server indicators; the id lets users hide it on its own.
    this.item = vscode.window.createStatusBarItem('dgLsp.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'DG language server';
    this.item.command = SHOW_STATUS_COMMAND;
    this.setStopped();
    this.item.show();
  }

  setStarting(): void {
    this.render('$(loading~spin) DG starting', 'Starting the dg-lsp server…', false);
  }

  setStopped(message = 'The dg-lsp server is not running.'): void {
    this.render('$(circle-slash) DG', message, false);
  }

  setError(message: string): void {
    this.render('$(error) DG error', message, true);
  }

  /** Applies a `dg/status` notification. */
  update(params: StatusParams): void {
    switch (params.state) {
      case 'loading':
        this.render('$(loading~spin) DG loading', params.message ?? 'Loading the model…', false);
        break;
      case 'ready': {
        const latency = formatLatency(params.lastLatencyMs);
        this.render(
          latency ? `$(check) DG ${latency}` : '$(check) DG',
          params.message ?? (latency ? `Ready; last request took ${latency}.` : 'Ready.'),
          false,
        );
        break;
      }
      case 'error':
        this.setError(params.message ?? 'The dg-lsp server reported an error.');
        break;
    }
  }

  dispose(): void {
    this.item.dispose();
  }

  private render(text: string, tooltip: string, isError: boolean): void {
    this.item.text = text;
    this.item.tooltip = `${tooltip}\n\nClick for details.`;
    // The error colour makes a failed start noticeable without a modal dialog.
    this.item.backgroundColor = isError
      ? new vscode.ThemeColor('statusBarItem.errorBackground')
      : undefined;
  }
}

export function formatLatency(ms: number | undefined): string | undefined {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    return undefined;
  }
  return ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}
