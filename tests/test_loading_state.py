"""While the model loads: every request is answered at once, and the editor is told why nothing
is offered yet (dg/status "loading", a work-done progress report, dg.status), until it is ready."""

from __future__ import annotations

import asyncio
import time

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import capabilities, command, open_doc, server_command, server_env, tiny_model_dir

ENV = {**server_env(), "DG_LSP_TEST_FAULTS": "1", "DG_LSP_TEST_LOAD_DELAY_S": "4"}
NOTIFIED: list[dict] = []


@pytest_lsp.fixture(config=ClientServerConfig(server_command=server_command(), server_env=ENV))
async def client(lsp_client: LanguageClient, tmp_path_factory):
    @lsp_client.feature("dg/status")
    def status(params):
        NOTIFIED.append({"state": params.state, "message": params.message})

    root = tmp_path_factory.mktemp("ws")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities(), root_uri=root.as_uri(), initialization_options={"model": str(tiny_model_dir())}))
    lsp_client.root = root
    yield
    await lsp_client.shutdown_session()


async def test_requests_are_answered_at_once_and_the_reason_is_shown(client):
    uri = (client.root / "a.py").as_uri()
    open_doc(client, uri, "def f(x):\n    return \n")
    params = types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(1, 11))
    started = time.perf_counter()
    result = await client.text_document_inline_completion_async(params)
    at = types.Position(1, 11)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), types.Range(at, at), types.CodeActionContext(diagnostics=[])))
    status = await command(client, "dg.status")
    waited = time.perf_counter() - started
    assert waited < 2.0, "requests waited for the model"  # it takes 4 s to load
    assert result is not None and not result.items and not actions
    assert status["state"] == "loading" and "loading model" in status["message"]
    assert any(n["state"] == "loading" for n in NOTIFIED)  # what the status bar / statusline shows
    begun = [p for _, p in client.progress_reports.items() if p and getattr(p[0], "title", "")]
    assert any("loading the model" in p[0].title for p in begun)  # the editor's progress spinner
    for _ in range(200):
        if (await command(client, "dg.status"))["state"] == "ready":
            break
        await asyncio.sleep(0.05)
    assert NOTIFIED[-1]["state"] == "ready"
    assert (await client.text_document_inline_completion_async(params)) is not None
