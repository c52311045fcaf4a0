"""Diffusion-native features over the real server: confidence, drafts, joint holes, rewrites.

The tiny random model is unsure of everything it writes, which makes it a good source of
low-confidence spans; these tests check the protocol behaviour, not the text.
"""

from __future__ import annotations

import asyncio

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import capabilities, command, open_doc, position_of, server_command, server_env, tiny_model_dir, wait_ready

DRAFTS: list[dict] = []


@pytest_lsp.fixture(config=ClientServerConfig(server_command=server_command(), server_env=server_env()), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    @lsp_client.feature("dg/draft")
    def draft(params):
        DRAFTS.append(as_dict(params))

    @lsp_client.feature("dg/status")
    def status(params):
        pass

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply(params):
        return types.ApplyWorkspaceEditResult(applied=True)

    root = tmp_path_factory.mktemp("ws")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities(), root_uri=root.as_uri(),
        initialization_options={"model": str(tiny_model_dir()), "maxSteps": 4, "drafts": True,
                                "confidence": {"threshold": 0.9, "display": "both"}}))
    lsp_client.root = root
    assert (await wait_ready(lsp_client))["state"] == "ready"
    yield
    await lsp_client.shutdown_session()


def as_dict(value):
    """pygls hands over unknown notifications' params as named tuples."""
    if hasattr(value, "_asdict"):
        return {k: as_dict(v) for k, v in value._asdict().items()}
    return value


def inline_params(uri, pos):
    return types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri), position=pos)


def change(client, uri, version, start, end, text):
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(version=version, uri=uri),
        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start, end), text=text)]))


async def wait_for(predicate, timeout=10.0):
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_drafts_stream_while_denoising_and_end_with_the_answer(client):
    text, pos = position_of("def mean(xs):\n    return <|>\n", "<|>")
    uri = (client.root / "drafts.py").as_uri()
    open_doc(client, uri, text)
    DRAFTS.clear()
    result = await client.text_document_inline_completion_async(inline_params(uri, pos))
    assert await wait_for(lambda: any(d["final"] for d in DRAFTS))
    drafts = [d for d in DRAFTS if d["uri"] == uri]
    assert any(not d["final"] for d in drafts), "no draft arrived before the answer"
    final = [d for d in drafts if d["final"]][-1]
    assert final["position"] == {"line": pos.line, "character": pos.character}
    assert final["text"] == (result.items[0].insert_text if result.items else "")


async def test_low_confidence_spans_appear_when_the_fill_lands_and_clear_when_edited(client):
    text, pos = position_of("def area(w, h):\n    return <|>\n", "<|>")
    uri = (client.root / "confidence.py").as_uri()
    open_doc(client, uri, text)
    result = await client.text_document_inline_completion_async(inline_params(uri, pos))
    assert result.items, "the tiny model should offer something here"
    shown = result.items[0].insert_text
    # The user accepts the ghost text: the editor inserts it.
    change(client, uri, 2, pos, pos, shown)
    assert await wait_for(lambda: client.diagnostics.get(uri))
    diagnostics = client.diagnostics[uri]
    assert all(d.code == "dg.low-confidence" and d.severity == types.DiagnosticSeverity.Hint for d in diagnostics)
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri),
        range=types.Range(types.Position(0, 0), types.Position(10, 0))))
    assert len(hints) == len(diagnostics)
    # Editing inside the first span clears it.
    first = diagnostics[0].range
    change(client, uri, 3, first.start, first.end, "x")
    assert await wait_for(lambda: len(client.diagnostics.get(uri, [])) == len(diagnostics) - 1)


async def test_fill_the_holes_fills_every_hole_in_one_pass(client):
    text = "def parse(line):\n    ...\n\n\ndef render(items):\n    ...\n"
    uri = (client.root / "holes.py").as_uri()
    open_doc(client, uri, text)
    at = types.Position(0, 0)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), types.Range(at, at), types.CodeActionContext(diagnostics=[])))
    holes = next(a for a in actions if a.title == "DG: Fill the holes")
    before = (await command(client, "dg.status"))["forwardPasses"]
    resolved = await client.code_action_resolve_async(holes)
    after = (await command(client, "dg.status"))["forwardPasses"]
    edits = resolved.edit.document_changes[0].edits
    assert sorted(e.range.start.line for e in edits) == [1, 5]  # both placeholders replaced
    assert after - before <= 4 + 1  # one denoising pass (maxSteps 4) for both holes, not two
