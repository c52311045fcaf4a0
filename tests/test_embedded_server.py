"""The shipped model behind the real server, where what it writes matters.

The embedded model is small and trained briefly (see the README), so these tests check what it
does reliably: a rewrite of a line that is already right gives it back unchanged (the canvas is
seeded with the line and only tokens the model doubts are re-noised), and ghost text for the
rest of a line stays on that line. Fills are seeded, so each case is reproducible.
"""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import open_doc, open_session, server_command, server_env

CORRECT_LINES = [
    ("def add(a, b):\n    return a + b\n", "return a + b"),
    ("import os\n\n\ndef home():\n    return os.path.expanduser('~')\n", "return os.path.expanduser('~')"),
    ("class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n"
     "        self.items.append(item)\n", "self.items.append(item)"),
    ("def is_empty(seq):\n    return len(seq) == 0\n", "return len(seq) == 0"),
]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=server_command(), server_env=server_env()), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    # No model option: the server loads the shipped model, as a fresh install does.
    status = await open_session(lsp_client, tmp_path_factory, timeout=120)
    assert status["state"] == "ready" and status["model"] == "embedded", status
    yield
    await lsp_client.shutdown_session()


def span(text: str, needle: str) -> types.Range:
    start = text.index(needle)
    line = text.count("\n", 0, start)
    column = start - (text.rfind("\n", 0, start) + 1)
    return types.Range(types.Position(line, column), types.Position(line, column + len(needle)))


@pytest.mark.parametrize("index", range(len(CORRECT_LINES)))
async def test_rewriting_a_correct_line_keeps_it(client, index):
    text, line = CORRECT_LINES[index]
    uri = (client.root / f"keep{index}.py").as_uri()
    open_doc(client, uri, text)
    selection = span(text, line)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), selection, types.CodeActionContext(diagnostics=[])))
    rewrite = next(a for a in actions if a.kind == types.CodeActionKind.RefactorRewrite)
    before = len(client.messages)
    resolved = await client.code_action_resolve_async(rewrite)
    changes = resolved.edit.document_changes[0].edits if resolved.edit else []
    assert changes == [], [(e.range, e.new_text) for e in changes]
    assert any("keep the text as it is" in m.message for m in client.messages[before:])


async def test_ghost_text_for_the_rest_of_a_line_stays_on_it(client):
    text = "def area(width, height):\n    return width * \n\n\nprint(area(2, 3))\n"
    uri = (client.root / "area.py").as_uri()
    open_doc(client, uri, text)
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(1, len("    return width * "))))
    for item in result.items:
        assert "\n" not in item.insert_text.rstrip("\n"), item.insert_text


async def test_a_rewrite_changes_only_what_the_model_doubts_as_a_minimal_edit(client):
    # "pr" of the misspelt "prnt" is the one token the model doubts (probability about 0.15); the
    # rest of the line is kept, and edits are cut at word boundaries, so the edit replaces the word
    # "prnt" only, not the whole selection.
    text = "for i in range(10):\n    prnt(i)\n"
    uri = (client.root / "typo.py").as_uri()
    open_doc(client, uri, text)
    selection = span(text, "prnt(i)")
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), selection, types.CodeActionContext(diagnostics=[])))
    rewrite = next(a for a in actions if a.kind == types.CodeActionKind.RefactorRewrite)
    resolved = await client.code_action_resolve_async(rewrite)
    assert resolved.edit is not None
    edits = resolved.edit.document_changes[0].edits
    start = selection.start.character
    assert edits and all(e.range.start.line == e.range.end.line == 1 for e in edits)
    assert all(start <= e.range.start.character and e.range.end.character <= start + len("prnt") for e in edits), \
        [(e.range, e.new_text) for e in edits]
