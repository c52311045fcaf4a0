"""The shipped model behind the real server, where what it writes matters.

The embedded model is small and trained briefly (see the README), so these tests check what it
does reliably: a rewrite of a line that is already right gives it back unchanged (the canvas is
seeded with the line and only tokens the model doubts are re-noised), and ghost text for the
rest of a line stays on that line. Fills are seeded, so each case is reproducible.
"""

from __future__ import annotations

import difflib
import re

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


async def rewrite_edits(client, name: str, text: str, line: str):
    """The edits of "Rewrite selection" on `line` of a new document, and the selection."""
    uri = (client.root / name).as_uri()
    open_doc(client, uri, text)
    selection = span(text, line)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), selection, types.CodeActionContext(diagnostics=[])))
    rewrite = next(a for a in actions if a.kind == types.CodeActionKind.RefactorRewrite)
    resolved = await client.code_action_resolve_async(rewrite)
    return (resolved.edit.document_changes[0].edits if resolved.edit else []), selection


@pytest.mark.parametrize("index", range(len(CORRECT_LINES)))
async def test_rewriting_a_correct_line_keeps_it(client, index):
    text, line = CORRECT_LINES[index]
    before = len(client.messages)
    changes, _ = await rewrite_edits(client, f"keep{index}.py", text, line)
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


# Lines with one misspelt word each. Which typo a model doubts depends on its training (the
# threshold is its own, `rewrite_config.json`), so the test takes every line the rewrite changes.
TYPO_LINES = [
    ("for i in range(10):\n    prnt(i)\n", "prnt(i)", "prnt"),
    ("def add(a, b):\n    retrun a + b\n", "retrun a + b", "retrun"),
    ("class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n"
     "        self.itmes.append(item)\n", "self.itmes.append(item)", "itmes"),
    ("def is_empty(seq):\n    return lne(seq) == 0\n", "return lne(seq) == 0", "lne"),
]


async def test_a_rewrite_changes_only_what_the_model_doubts_as_minimal_edits(client):
    # Only the tokens the model doubts are re-noised, and edits are cut at word boundaries: no
    # edit starts or ends inside a word, and on some line the text changed is the misspelt word's
    # own (with the space its first token carries).
    changed, on_the_typo = [], 0
    for index, (text, line, typo) in enumerate(TYPO_LINES):
        edits, selection = await rewrite_edits(client, f"typo{index}.py", text, line)
        if not edits:
            continue
        start = selection.start.character
        cuts = [(e.range.start.character - start, e.range.end.character - start, e.new_text) for e in edits]
        changed.append((line, cuts))
        inside_words = {k for m in re.finditer(r"\w+", line) for k in range(m.start() + 1, m.end())}
        for e, (a, b, _) in zip(edits, cuts):
            assert e.range.start.line == e.range.end.line == selection.start.line, changed[-1]
            assert a not in inside_words and b not in inside_words, changed[-1]
        new = line
        for a, b, replacement in sorted(cuts, reverse=True):
            new = new[:a] + replacement + new[b:]
        at = line.index(typo)
        ops = [op for op in difflib.SequenceMatcher(None, line, new, autojunk=False).get_opcodes() if op[0] != "equal"]
        on_the_typo += all(at - 1 <= i1 and i2 <= at + len(typo) for _, i1, i2, _, _ in ops)
    assert changed, "the rewrite left every misspelt line as it was"
    assert on_the_typo, changed
