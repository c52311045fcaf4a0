"""The real server over stdio, driven by pytest-lsp, with the tiny random model.

These tests check the protocol behaviour (capabilities, sync, edits, cancellation, settings);
the text the tiny model writes is noise, so nothing here asserts on what it says.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_lsp
from pygls.exceptions import JsonRpcRequestCancelled
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import capabilities, command, open_doc, position_of, server_command, server_env, sha, tiny_model_dir, wait_ready

TINY = str(tiny_model_dir())
APPLIED: list[types.ApplyWorkspaceEditParams] = []


@pytest_lsp.fixture(config=ClientServerConfig(server_command=server_command(), server_env=server_env()), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply(params: types.ApplyWorkspaceEditParams):
        APPLIED.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    @lsp_client.feature("dg/status")
    def status(params):
        pass

    root = tmp_path_factory.mktemp("ws")
    params = types.InitializeParams(
        capabilities=capabilities(), root_uri=root.as_uri(),
        initialization_options={"model": TINY, "maxSteps": 4, "candidates": 2},
    )
    await lsp_client.initialize_session(params)
    lsp_client.root = root
    status = await wait_ready(lsp_client)
    assert status["state"] == "ready", status
    yield
    await lsp_client.shutdown_session()


def uri(client, name: str) -> str:
    return (client.root / name).as_uri()


async def test_capabilities(client: LanguageClient):
    caps = client.protocol.server_capabilities if hasattr(client.protocol, "server_capabilities") else None
    result = await command(client, "dg.status")
    assert result["format"] == "fim" and result["positionEncoding"] == "utf-16"


async def test_status_reports_model_and_device(client):
    status = await command(client, "dg.status")
    for key in ("model", "device", "dtype", "quantization", "memoryBytes", "lastLatencyMs", "parameters"):
        assert key in status
    assert status["model"] == TINY and status["device"] == "cpu"


def utf16_offset(text: str, line: int, character: int) -> int:
    lines = text.split("\n")
    head = lines[line].encode("utf-16-le")[: character * 2].decode("utf-16-le")
    return sum(len(l) + 1 for l in lines[:line]) + len(head)


async def test_incremental_sync_with_wide_characters_matches_full_text(client):
    u = uri(client, "sync.py")
    text = "x = 1\n"
    open_doc(client, u, text)
    # (line, UTF-16 column, UTF-16 units removed, inserted text): emoji, CJK, combining accent.
    script = [(0, 0, 0, "a😀b"), (0, 4, 0, "\n日本\n"), (2, 1, 0, "e\u0301"), (0, 1, 2, ""), (1, 1, 1, "語")]
    for version, (line, char, removed, new) in enumerate(script, start=2):
        start = utf16_offset(text, line, char)
        end = utf16_offset(text, line, char + removed)
        rng = types.Range(types.Position(line, char), types.Position(line, char + removed))
        text = text[:start] + new + text[end:]
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(version=version, uri=u),
            content_changes=[types.TextDocumentContentChangePartial(range=rng, text=new)]))
    result = await command(client, "dg.documentHash", {"uri": u})
    assert result == {"version": len(script) + 1, "sha256": sha(text)}


async def test_inline_completion_returns_candidates_at_the_cursor(client):
    text, pos = position_of("def area(w, h):\n    return <|>\n", "<|>")
    u = uri(client, "inline.py")
    open_doc(client, u, text)
    before = (await command(client, "dg.status"))["forwardPasses"]
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(u), position=pos))
    after = (await command(client, "dg.status"))["forwardPasses"]
    assert after > before  # the model ran
    assert result is not None and len(result.items) <= 2
    for item in result.items:
        assert item.range.start == pos and item.insert_text.strip()


async def test_completion_is_incomplete_and_replaces_the_word(client):
    text, pos = position_of("value = 3\nresult = val<|>\n", "<|>")
    u = uri(client, "complete.py")
    open_doc(client, u, text)
    result = await client.text_document_completion_async(types.CompletionParams(types.TextDocumentIdentifier(u), pos))
    assert result.is_incomplete is True
    for item in result.items:
        assert item.text_edit.range.start == types.Position(1, 9) and item.text_edit.new_text.startswith("val")


async def test_code_actions_listed_and_resolved(client):
    text, pos = position_of("def todo(x):\n    ...\n\n\ndef main():\n    <|>\n", "<|>")
    u = uri(client, "actions.py")
    open_doc(client, u, text)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(u), types.Range(pos, pos), types.CodeActionContext(diagnostics=[])))
    titles = {a.title for a in actions}
    assert "DG: Fill in the middle here" in titles and "DG: Fill the holes" in titles
    assert all(a.edit is None and a.data["uri"] == u for a in actions)
    fill = next(a for a in actions if a.title == "DG: Fill in the middle here")
    resolved = await client.code_action_resolve_async(fill)
    change = resolved.edit.document_changes[0]
    assert change.text_document.uri == u and change.text_document.version == 1
    assert all(e.range.start == pos for e in change.edits)


async def test_rewrite_selection_changes_only_the_selection(client):
    text = "def f(a, b):\n    total = a + b\n    return total\n"
    u = uri(client, "rewrite.py")
    open_doc(client, u, text)
    sel = types.Range(types.Position(1, 4), types.Position(1, 17))
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(u), sel, types.CodeActionContext(diagnostics=[])))
    rewrite = next(a for a in actions if a.kind == types.CodeActionKind.RefactorRewrite)
    resolved = await client.code_action_resolve_async(rewrite)
    # The random model always changes something; every change stays inside the selection.
    assert resolved.edit is not None
    for edit in resolved.edit.document_changes[0].edits:
        assert sel.start.line == edit.range.start.line == edit.range.end.line == 1
        assert sel.start.character <= edit.range.start.character <= edit.range.end.character <= sel.end.character


async def test_stale_action_is_not_applied(client):
    text = "x = 1\n"
    u = uri(client, "stale.py")
    open_doc(client, u, text)
    at = types.Position(1, 0)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(u), types.Range(at, at), types.CodeActionContext(diagnostics=[])))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(version=2, uri=u), content_changes=[types.TextDocumentContentChangeWholeDocument(text="y = 2\n")]))
    resolved = await client.code_action_resolve_async(actions[0])
    assert resolved.edit is None


async def test_paragraph_rewrite_applies_a_workspace_edit(client):
    text = "# Title\n\nThis paragraph is the one\nthat gets rewritten.\n\nThis one stays.\n"
    u = uri(client, "notes.md")
    open_doc(client, u, text, language="markdown")
    APPLIED.clear()
    # With an instruction the decoder rewrites, which the tiny random model always does; without
    # one the paragraph is proofread, which only the trained model judges (tests/test_proofread.py).
    result = await command(client, "dg.rewriteParagraph", {"uri": u, "position": {"line": 2, "character": 3},
                                                           "instruction": "reword it"})
    assert isinstance(result, dict) and result["applied"] is True, result
    assert len(APPLIED) == 1
    edits = APPLIED[0].edit.document_changes[0].edits
    assert edits and all(2 <= e.range.start.line and e.range.end.line <= 3 for e in edits)


async def test_commands_take_the_standard_parameter_shapes(client):
    text = "# Title\n\nThis paragraph is the one\nthat gets rewritten.\n"
    u = uri(client, "standard.md")
    open_doc(client, u, text, language="markdown")
    here = {"line": 2, "character": 3}
    APPLIED.clear()
    # TextDocumentPositionParams, as Helix, eglot or Zed send for a bound command.
    result = await command(client, "dg.rewriteParagraph", {"textDocument": {"uri": u}, "position": here,
                                                           "instruction": "reword it"})
    assert result["applied"] is True, result
    # Proofread (no instruction): the same shape is accepted; the tiny model may find nothing to change.
    result = await command(client, "dg.rewriteParagraph", {"textDocument": {"uri": u}, "position": here})
    assert result["applied"] is True or result["message"] == "the model had nothing to change", result
    code = "def add(a, b):\n    return \n"
    cu = uri(client, "standard.py")
    open_doc(client, cu, code)
    at = {"line": 1, "character": 11}
    for arg in ({"textDocument": {"uri": cu}, "position": at},
                {"textDocument": {"uri": cu}, "range": {"start": at, "end": at}},
                {"uri": cu, "position": at}):
        result = await command(client, "dg.infill", arg)
        assert "needs" not in result.get("message", ""), (arg, result)
        assert result["applied"] is True or result["message"] == "the model had nothing to change", (arg, result)
    digest = await command(client, "dg.documentHash", {"textDocument": {"uri": cu}})
    assert digest is not None and digest == await command(client, "dg.documentHash", {"uri": cu})
    bad = await command(client, "dg.infill", {"textDocument": {}, "position": at})
    assert bad["applied"] is False and "textDocument" in bad["message"]


async def test_invalid_settings_fall_back_with_a_message(client):
    client.messages.clear()
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dgLsp": {"candidates": 99, "confidence": {"display": "sideways"}}}))
    for _ in range(100):
        if len(client.messages) >= 2:
            break
        await asyncio.sleep(0.02)
    text = " ".join(m.message for m in client.messages)
    assert "candidates" in text and "confidence_display" in text


async def test_cancel_a_running_request(client):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        # No background next-edit runs either: only the cancelled request may make decoder passes.
        settings={"dgLsp": {"maxSteps": 400, "canvasLength": 256, "nextEdit": {"enabled": False}}}))
    await asyncio.sleep(0.1)
    text, pos = position_of("def slow():\n    <|>\n", "<|>")
    u = uri(client, "cancel.py")
    open_doc(client, u, text)
    params = types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(u), position=pos)
    task = asyncio.ensure_future(
        client.protocol.send_request_async(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id="cancel-me"))
    start = (await command(client, "dg.status"))["forwardPasses"]
    for _ in range(200):  # wait until the worker is denoising
        await asyncio.sleep(0.02)
        if (await command(client, "dg.status"))["forwardPasses"] > start + 1:
            break
    sent = time.perf_counter()
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="cancel-me"))
    with pytest.raises(JsonRpcRequestCancelled):
        await task
    replied = time.perf_counter() - sent
    await asyncio.sleep(0.3)
    a = (await command(client, "dg.status"))["forwardPasses"]
    await asyncio.sleep(0.3)
    b = (await command(client, "dg.status"))["forwardPasses"]
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dgLsp": {"maxSteps": 4, "canvasLength": 16}}))
    assert a == b, "the worker kept denoising after the cancel"
    assert replied < 1.0


async def test_typed_ahead_is_served_without_the_model(client):
    text, pos = position_of("def name():\n    return <|>\n", "<|>")
    u = uri(client, "typed.py")
    open_doc(client, u, text)
    params = types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Automatic),
        text_document=types.TextDocumentIdentifier(u), position=pos)
    first = await client.text_document_inline_completion_async(params)
    assert first.items
    shown = first.items[0].insert_text
    if len(shown) < 2:
        pytest.skip("the tiny model offered a one-character suggestion here")
    typed = shown[0]
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(version=2, uri=u),
        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text=typed)]))
    before = await command(client, "dg.status")
    after_pos = types.Position(pos.line, pos.character + len(typed.encode("utf-16-le")) // 2)
    second = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        context=params.context, text_document=params.text_document, position=after_pos))
    after = await command(client, "dg.status")
    assert second.items[0].insert_text == shown[len(typed):]
    assert after["forwardPasses"] == before["forwardPasses"]
    assert after["typedAheadHits"] == before["typedAheadHits"] + 1


async def test_code_action_resolve_reports_progress(client):
    text, pos = position_of("def g():\n    <|>\n", "<|>")
    u = uri(client, "progress.py")
    open_doc(client, u, text)
    client.progress_reports.clear()
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(u), types.Range(pos, pos), types.CodeActionContext(diagnostics=[])))
    await client.code_action_resolve_async(actions[0])
    kinds = [getattr(r, "kind", None) for reports in client.progress_reports.values() for r in reports]
    assert "begin" in kinds and "end" in kinds
