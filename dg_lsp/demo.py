"""`make demo`: the real server over stdio, asked what an editor would ask, with timings.

It writes a small Python file and a Markdown note to a temporary folder, starts `dg-lsp serve` as
a separate process, and drives it with pygls' LSP client: an inline completion at a cursor, the
"Fill in the middle here" code action (listed, then resolved), and a paragraph rewrite applied
through workspace/applyEdit. It prints what came back and how long each answer took.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from .edits import apply_edits

SOURCE = '''import math


class Circle:
    def __init__(self, radius):
        self.radius = radius

    def area(self):
        return math.pi * self.radius ** 2

    def circumference(self):
        return 2 * math.pi * self.radius


def total_area(circles):
    total = 0
    for circle in circles:
        total += circle.area()
    return total
'''
# The demo's cursors: (line, character), 0-based, as LSP counts them.
INLINE_AT = (11, 15)  # inside `return 2 * math.pi * self.radius`, after "return 2 * "
ACTION_AT = (18, 4)  # the start of `return total`

NOTE = """# Notes

This module computes area of circles and it also can compute the circumference of them, the
function total_area add the the areas of many circles together and return the totl of it.

It has no dependencies.
"""
PARAGRAPH_AT = (2, 10)


def _print(title: str, text: str, ms: float) -> None:
    print(f"\n== {title} ({ms:.0f} ms)")
    print(text if text.strip() else "(empty)")


async def _inline(client: LanguageClient, doc: types.TextDocumentIdentifier, timeout: float) -> str:
    """The ghost text an editor would show at INLINE_AT."""
    inline = await asyncio.wait_for(client.text_document_inline_completion_async(types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Automatic),
        text_document=doc, position=types.Position(*INLINE_AT))), timeout)
    return inline.items[0].insert_text if inline and inline.items else ""


async def _fill_action(client: LanguageClient, doc: types.TextDocumentIdentifier, timeout: float) -> tuple[list[str], str]:
    """The code actions at ACTION_AT, and the text "Fill in the middle here" inserts once resolved."""
    at = types.Position(*ACTION_AT)
    actions = await asyncio.wait_for(client.text_document_code_action_async(types.CodeActionParams(
        doc, types.Range(at, at), types.CodeActionContext(diagnostics=[]))), timeout)
    titles = [a.title for a in actions or []]
    fill = next((a for a in actions or [] if "middle" in a.title and isinstance(a, types.CodeAction)), None)
    resolved = await asyncio.wait_for(client.code_action_resolve_async(fill), timeout) if fill else None
    edits = resolved.edit.document_changes[0].edits if resolved and resolved.edit else []
    return titles, edits[0].new_text if edits else ""


async def run(model: str, timeout: float) -> int:
    folder = Path(tempfile.mkdtemp(prefix="dg-demo-"))
    source, note = folder / "shapes.py", folder / "NOTES.md"
    lines = SOURCE.splitlines(keepends=True)
    # The inline completion is asked where the rest of a line was deleted.
    cut_line = lines[INLINE_AT[0]]
    lines[INLINE_AT[0]] = cut_line[: INLINE_AT[1]] + "\n"
    text = "".join(lines)
    source.write_text(text)
    note.write_text(NOTE)

    client = LanguageClient("dg-demo", "1")
    ready = asyncio.get_running_loop().create_future()
    documents = {source.as_uri(): text, note.as_uri(): NOTE}

    @client.feature("dg/status")
    def on_status(params):
        state = getattr(params, "state", None) or (params.get("state") if isinstance(params, dict) else None)
        if state in ("ready", "error") and not ready.done():
            ready.set_result((state, getattr(params, "message", "")))

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(params: types.ApplyWorkspaceEditParams):
        from .convert import Codec

        for change in params.edit.document_changes or []:
            uri = change.text_document.uri
            codec = Codec(documents[uri])
            edits = [(*codec.offsets(e.range), e.new_text) for e in change.edits]
            documents[uri] = apply_edits(documents[uri], edits)
        return types.ApplyWorkspaceEditResult(applied=True)

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_message(params):
        print(f"[server] {params.message}", file=sys.stderr)

    started = time.perf_counter()
    await client.start_io(sys.executable, "-m", "dg_lsp", "serve", "--model", model)
    try:
        # Like VS Code, the demo resolves a code action's edit lazily; without this the server answers
        # with commands, for clients that cannot.
        caps = types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=False),
            text_document=types.TextDocumentClientCapabilities(code_action=types.CodeActionClientCapabilities(
                resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]))))
        init = await asyncio.wait_for(client.initialize_async(
            types.InitializeParams(capabilities=caps, root_uri=folder.as_uri(), process_id=None)), timeout)
        client.initialized(types.InitializedParams())
        print(f"server: {init.server_info.name} {init.server_info.version}, initialize answered in "
              f"{(time.perf_counter() - started) * 1000:.0f} ms")
        state, message = await asyncio.wait_for(ready, timeout)
        print(f"model: {state} ({message}) after {(time.perf_counter() - started):.1f} s")
        if state != "ready":
            return 1
        for path, body, lang in ((source, text, "python"), (note, NOTE, "markdown")):
            client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(path.as_uri(), lang, 1, body)))

        doc = types.TextDocumentIdentifier(source.as_uri())
        t = time.perf_counter()
        shown = await _inline(client, doc, timeout)
        _print(f"inline completion after {cut_line[:INLINE_AT[1]].strip()!r}", shown, (time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        titles, inserted = await _fill_action(client, doc, timeout)
        _print(f"code actions {titles}; resolved 'Fill in the middle here'", inserted, (time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        result = await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
            "dg.rewriteParagraph", [{"uri": note.as_uri(), "position": {"line": PARAGRAPH_AT[0], "character": PARAGRAPH_AT[1]}}])),
            timeout)
        _print(f"paragraph rewrite {result}", documents[note.as_uri()], (time.perf_counter() - t) * 1000)

        status = await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams("dg.status", [])),
                                        timeout)
        print(f"\nstatus: {status}")
        await client.shutdown_async(None)
        client.exit(None)
        return 0
    except TimeoutError:
        print(f"error: the server did not answer within {timeout:.0f} s", file=sys.stderr)
        return 1
    finally:
        await client.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Ask the real dg-lsp server for a fill, a code action and a rewrite.")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    return asyncio.run(run(args.model, args.timeout))


if __name__ == "__main__":
    raise SystemExit(main())
