// Refining drafts: while a fill is denoising, the server (when `dgLsp.drafts` is on) sends
// `dg/draft` notifications with the current best guess. They are shown as faint after-text at the
// insertion point so the user can watch the text converge; nothing is written to the document —
// the final result arrives separately as a real edit (workspace/applyEdit).
import * as vscode from 'vscode';

/** Params of `dg/draft`, after the position has been converted to VS Code's types. */
export interface Draft {
  uri: string;
  position: vscode.Position;
  text: string;
  final: boolean;
}

// An `after` attachment is a single line of CSS-generated content, so a multi-line draft cannot
// be laid out as real lines; line breaks are shown as a visible marker instead, and very long
// drafts are cut so they do not push the rest of the line far out of view.
const NEWLINE_MARK = ' ⏎ ';
const MAX_CHARS = 240;

export function flattenDraft(text: string): string {
  const flat = text.replace(/\r\n?/g, '\n').replace(/\n/g, NEWLINE_MARK).replace(/\t/g, '  ');
  return flat.length > MAX_CHARS ? `${flat.slice(0, MAX_CHARS - 1)}…` : flat;
}

interface Shown {
  uri: string;
  position: vscode.Position;
}

export class DraftRenderer implements vscode.Disposable {
  private readonly decoration: vscode.TextEditorDecorationType;
  private readonly disposables: vscode.Disposable[] = [];
  /** The latest draft to show; `shown` is where it was last drawn. */
  private current: Draft | undefined;
  private shown: Shown | undefined;
  // A fill the user has moved away from: its remaining non-final drafts are dropped instead of
  // popping back up under the cursor. Cleared by the fill's final notification.
  private dismissed: string | undefined;

  constructor(private readonly enabled: () => boolean) {
    this.decoration = vscode.window.createTextEditorDecorationType({
      after: {
        fontStyle: 'italic',
        color: new vscode.ThemeColor('editorGhostText.foreground'),
        // Attachments have no `opacity` property; VS Code puts `textDecoration` verbatim into the
        // generated CSS rule, which is the usual way to add one. It keeps drafts visibly fainter
        // than the regular ghost text of an inline suggestion.
        textDecoration: 'none; opacity: 0.55',
      },
      rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
    });
    this.disposables.push(
      this.decoration,
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.contentChanges.length > 0 && this.isShownIn(e.document.uri)) {
          this.dismiss();
        }
      }),
      vscode.window.onDidChangeTextEditorSelection((e) => {
        // `kind` is undefined for programmatic moves (for example the server's own edit landing);
        // only a move by the user means "I am doing something else now".
        if (e.kind !== undefined && this.isShownIn(e.textEditor.document.uri)) {
          this.dismiss();
        }
      }),
      // A draft is only drawn in visible editors; when the editor for its document comes back into
      // view, draw it again.
      vscode.window.onDidChangeVisibleTextEditors(() => this.redraw()),
    );
  }

  show(draft: Draft): void {
    const key = keyOf(draft);
    if (draft.final) {
      if (this.dismissed === key) {
        this.dismissed = undefined;
      }
      // The finished text lands as a real edit; the faint preview must not linger next to it.
      if (this.current === undefined || this.current.uri === draft.uri) {
        this.clear();
      }
      return;
    }
    if (!this.enabled() || this.dismissed === key) {
      return;
    }
    // A new draft replaces whatever was shown before, also when it belongs to another fill.
    if (this.current && this.current.uri !== draft.uri) {
      this.clear();
    }
    this.current = draft;
    this.redraw();
  }

  /**
   * Forgets dismissals and hides any draft; called when a fill command starts and ends, so a fill
   * whose final notification never came (cancelled, server restarted) cannot leave a stale draft
   * on screen or keep suppressing drafts at that position.
   */
  reset(): void {
    this.dismissed = undefined;
    this.clear();
  }

  clear(): void {
    this.current = undefined;
    if (this.shown) {
      for (const editor of this.editorsFor(this.shown.uri)) {
        editor.setDecorations(this.decoration, []);
      }
      this.shown = undefined;
    }
  }

  dispose(): void {
    this.clear();
    for (const d of this.disposables) {
      d.dispose();
    }
  }

  private dismiss(): void {
    if (this.current) {
      this.dismissed = keyOf(this.current);
    }
    this.clear();
  }

  private redraw(): void {
    const draft = this.current;
    if (!draft) {
      return;
    }
    const text = flattenDraft(draft.text);
    const options: vscode.DecorationOptions[] = text
      ? [
          {
            range: new vscode.Range(draft.position, draft.position),
            renderOptions: { after: { contentText: text } },
            hoverMessage: 'DG draft (still refining)',
          },
        ]
      : [];
    for (const editor of this.editorsFor(draft.uri)) {
      editor.setDecorations(this.decoration, options);
    }
    this.shown = { uri: draft.uri, position: draft.position };
  }

  private isShownIn(uri: vscode.Uri): boolean {
    return this.shown !== undefined && this.shown.uri === uri.toString();
  }

  private editorsFor(uri: string): vscode.TextEditor[] {
    return vscode.window.visibleTextEditors.filter((e) => e.document.uri.toString() === uri);
  }
}

function keyOf(draft: { uri: string; position: vscode.Position }): string {
  return `${draft.uri}#${draft.position.line}:${draft.position.character}`;
}
