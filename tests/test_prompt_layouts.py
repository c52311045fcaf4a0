"""Prompt layouts for released checkpoints: the chat path on a tiny Gemma-style chat model, the
pinned-suffix layout, and the cleanup of chat answers; the first two end to end over the server."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from dg_engine import EngineConfig, FillRequest, load_engine
from dg_engine.prompt import ChatFormat, PinnedFormat, choose_format, clean_chat_answer
from dg_engine.tiny import save_tiny_chat
from lsp_helpers import command, open_doc, open_session, server_command, server_env

CHAT_DIR = save_tiny_chat(Path(tempfile.mkdtemp(prefix="dg-tiny-chat-")) / "model")
PREFIX = "def area(width, height):\n    return "


@pytest.mark.parametrize("answer, middle", [
    ("```python\nwidth * height\n```", "width * height"),
    ("```\nwidth * height", "width * height"),
    ("    return width * height", "width * height"),
    ("return width * height", "width * height"),
    ("def area(width, height):\n    return width * height", "width * height"),
    ("width * height", "width * height"),
    ("heightwidth", "heightwidth"),  # nothing repeated: kept as written
])
def test_chat_answers_lose_their_fence_and_the_repeated_context(answer, middle):
    assert clean_chat_answer(answer, PREFIX) == middle


def test_the_chat_prompt_is_the_models_own_template_and_stops_at_the_end_of_turn():
    engine = load_engine(EngineConfig(model=str(CHAT_DIR), prompt_format="chat"))
    assert isinstance(engine.format, ChatFormat)
    text = engine.tokenizer.decode(engine.format.infill_ids(PREFIX, "\n"))
    assert text.startswith("<bos><start_of_turn>user\n") and text.endswith("<end_of_turn>\n<start_of_turn>model\n")
    assert "<|HOLE|>" in text and PREFIX.strip() in text
    end_of_turn = engine.tokenizer.convert_tokens_to_ids("<end_of_turn>")
    assert end_of_turn in engine.format.stop_ids
    cand = engine.fill(FillRequest(PREFIX, "\n")).candidates[0]
    assert end_of_turn not in cand.token_ids  # the answer is cut there
    pinned = choose_format(engine.tokenizer, requested="pinned")
    assert isinstance(pinned, PinnedFormat) and isinstance(pinned.base, ChatFormat)
    assert engine.tokenizer.decode(pinned.infill_ids(PREFIX, "\n")).endswith("<start_of_turn>model\n")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=server_command(), server_env=server_env()))
async def chat(lsp_client: LanguageClient, tmp_path_factory):
    options = {"model": str(CHAT_DIR), "promptFormat": "chat", "maxSteps": 3}
    assert (await open_session(lsp_client, tmp_path_factory, options))["state"] == "ready"
    yield
    await lsp_client.shutdown_session()


async def test_a_chat_model_serves_ghost_text_and_switches_to_the_pinned_layout(chat):
    assert (await command(chat, "dg.status"))["format"] == "chat"
    uri = (chat.root / "a.py").as_uri()
    open_doc(chat, uri, PREFIX + "\n\nprint(area(2, 3))\n")
    params = types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(1, 11))
    result = await chat.text_document_inline_completion_async(params)
    assert result is not None  # answered (possibly empty: the random model's text is noise)
    assert all("```" not in item.insert_text and "<end_of_turn>" not in item.insert_text for item in result.items)
    chat.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"dgLsp": {"model": str(CHAT_DIR), "promptFormat": "pinned", "maxSteps": 3}}))
    for _ in range(200):
        status = await command(chat, "dg.status")
        if status.get("format") == "pinned" and status["state"] == "ready":
            break
        await asyncio.sleep(0.05)
    assert status["format"] == "pinned"
    assert await chat.text_document_inline_completion_async(params) is not None
