// Next-edit suggestions: after the user pauses following an edit, ask the server (`dg/nextEdit`)
// for the edits that edit implies and draw them in place, accepted with Tab.
//
// VS Code 1.95 (the oldest version this extension supports) has no public API for inline edits
// (the `InlineEdit` provider is a proposed API that marketplace extensions cannot use), so the
// suggestion is drawn with decorations: the text an edit replaces struck through on the diff
// editor's "removed" background, the new text after it on the "inserted" background. The
// `dgLsp.nextEditVisible` context key turns on the Tab and Escape keybindings of package.json.
import * as vscode from 'vscode';
import { LSPErrorCodes, ResponseError } from 'vscode-languageclient/node';

import type { ServerManager } from './client';
import * as config from './config';
import { flattenDraft } from './drafts';

export const CONTEXT_KEY = 'dgLsp.nextEditVisible';

interface WireEdit {
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  newText: string;
  confidence?: number;
}

/** Reply of `dg/nextEdit`: edits for one version of the document, or null. */
export interface NextEditReply {
  edits: WireEdit[];
  confidence: number;
  version: number;
}

interface Shown {
  uri: string;
  version: number;
  edits: { range: vscode.Range; newText: string }[];
}

export class NextEditController implements vscode.Disposable {
  private readonly removed: vscode.TextEditorDecorationType;
  private readonly inserted: vscode.TextEditorDecorationType;
  private readonly disposables: vscode.Disposable[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private request: vscode.CancellationTokenSource | undefined;
  private shown: Shown | undefined;
  // The document our own accept is changing: that change must not ask again at once.
  private applying: string | undefined;

  constructor(private readonly manager: ServerManager) {
    this.removed = vscode.window.createTextEditorDecorationType({
      textDecoration: 'line-through',
      backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
    });
    this.inserted = vscode.window.createTextEditorDecorationType({
      after: { backgroundColor: new vscode.ThemeColor('diffEditor.insertedTextBackground') },
    });
    this.disposables.push(
      this.removed,
      this.inserted,
      vscode.workspace.onDidChangeTextDocument((e) => this.onChange(e)),
      vscode.window.onDidChangeActiveTextEditor(() => this.dismiss()),
    );
  }

  private onChange(e: vscode.TextDocumentChangeEvent): void {
    if (e.contentChanges.length === 0) {
      return;
    }
    const uri = e.document.uri.toString();
    if (this.shown?.uri === uri) {
      this.clear();
    }
    if (this.applying === uri) {
      return;
    }
    if (!config.nextEditEnabled() || !config.languages().includes(e.document.languageId)) {
      return;
    }
    this.cancel();
    this.timer = setTimeout(() => {
      const editor = vscode.window.activeTextEditor;
      if (editor && editor.document.uri.toString() === uri) {
        void this.suggest(editor, false);
      }
    }, config.nextEditDebounceMs());
  }

  /** Ask for the next edit at the cursor; `invoked` says so when there is none. */
  async suggest(editor: vscode.TextEditor, invoked: boolean): Promise<boolean> {
    const client = this.manager.running;
    if (!client) {
      if (invoked) {
        void vscode.window.showInformationMessage('DG: the server is not running.');
      }
      return false;
    }
    this.cancel();
    const source = new vscode.CancellationTokenSource();
    this.request = source;
    const document = editor.document;
    const version = document.version;
    const position = editor.selection.active;
    let reply: NextEditReply | null;
    try {
      reply = await client.sendRequest<NextEditReply | null>(
        'dg/nextEdit',
        { textDocument: { uri: document.uri.toString() }, position: { line: position.line, character: position.character } },
        source.token,
      );
    } catch (error) {
      if (!(error instanceof ResponseError && error.code === LSPErrorCodes.RequestCancelled) && invoked) {
        void vscode.window.showWarningMessage(`DG: next edit failed: ${String(error)}`);
      }
      return false;
    } finally {
      if (this.request === source) {
        this.request = undefined;
      }
      source.dispose();
    }
    // An answer for a text that has changed since would land in the wrong place.
    if (!reply || reply.edits.length === 0 || document.version !== version || reply.version !== version) {
      if (invoked && document.version === version) {
        void vscode.window.showInformationMessage('DG: no next edit to suggest here.');
      }
      return false;
    }
    this.show(editor, reply);
    return true;
  }

  private show(editor: vscode.TextEditor, reply: NextEditReply): void {
    const edits = reply.edits.map((e) => ({
      range: new vscode.Range(e.range.start.line, e.range.start.character, e.range.end.line, e.range.end.character),
      newText: e.newText,
    }));
    const removed = edits.filter((e) => !e.range.isEmpty).map((e) => ({ range: e.range }));
    const inserted = edits
      .filter((e) => e.newText !== '')
      .map((e) => ({
        range: new vscode.Range(e.range.end, e.range.end),
        renderOptions: { after: { contentText: flattenDraft(e.newText) } },
        hoverMessage: `DG: suggested edit (${Math.round((reply.confidence ?? 0) * 100)}% sure); Tab applies, Escape hides`,
      }));
    editor.setDecorations(this.removed, removed);
    editor.setDecorations(this.inserted, inserted);
    this.shown = { uri: editor.document.uri.toString(), version: editor.document.version, edits };
    void vscode.commands.executeCommand('setContext', CONTEXT_KEY, true);
  }

  /** Apply the shown suggestion; false when there is none for the active document's version. */
  async accept(): Promise<boolean> {
    const shown = this.shown;
    const editor = vscode.window.activeTextEditor;
    if (!shown || !editor || editor.document.uri.toString() !== shown.uri || editor.document.version !== shown.version) {
      this.clear();
      return false;
    }
    this.clear();
    const edit = new vscode.WorkspaceEdit();
    for (const e of shown.edits) {
      edit.replace(editor.document.uri, e.range, e.newText);
    }
    this.applying = shown.uri;
    try {
      return await vscode.workspace.applyEdit(edit);
    } finally {
      this.applying = undefined;
    }
  }

  dismiss(): void {
    this.cancel();
    this.clear();
  }

  private cancel(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.request?.cancel();
    this.request = undefined;
  }

  private clear(): void {
    if (this.shown) {
      for (const editor of vscode.window.visibleTextEditors) {
        if (editor.document.uri.toString() === this.shown.uri) {
          editor.setDecorations(this.removed, []);
          editor.setDecorations(this.inserted, []);
        }
      }
      this.shown = undefined;
      void vscode.commands.executeCommand('setContext', CONTEXT_KEY, false);
    }
  }

  dispose(): void {
    this.dismiss();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
