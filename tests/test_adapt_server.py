"""Learning a repository from the server: completions keep coming while it trains, the adapter
is loaded when it is ready, a bad one is refused with the base model serving, and a workspace
file cannot turn adapters on."""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from dg_lsp.settings import Settings
from lsp_helpers import capabilities, command, open_doc, server_command, server_env, tiny_model_dir, wait_ready

CACHE = Path(tempfile.mkdtemp(prefix="dg-adapt-cache-"))
WORKSPACE = Path(tempfile.mkdtemp(prefix="dg-adapt-ws-")) / "shapes"
CODE = "def area(width, height):\n    return width * height\n\n\ndef perimeter(width, height):\n    return 2 * (width + height)\n"


def make_repo(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(3):
        (root / f"m{i}.py").write_text(CODE * (i + 1))
    for args in (["init", "-q"], ["add", "."], ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


make_repo(WORKSPACE)
ENV = {**server_env(), "XDG_CACHE_HOME": str(CACHE)}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=server_command(), server_env=ENV))
async def client(lsp_client: LanguageClient):
    @lsp_client.feature("dg/status")
    def status(params):
        pass

    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities(), root_uri=WORKSPACE.as_uri(),
        initialization_options={"model": str(tiny_model_dir()), "maxSteps": 2, "adapter": "workspace"}))
    assert (await wait_ready(lsp_client))["state"] == "ready"
    yield
    await lsp_client.shutdown_session()


async def until(client, predicate, timeout: float = 180.0) -> dict:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = await command(client, "dg.status")
        if predicate(status) or asyncio.get_running_loop().time() > deadline:
            return status
        await asyncio.sleep(0.2)


async def test_completions_go_on_while_learning_and_the_adapter_is_loaded_after(client):
    assert (await command(client, "dg.status"))["adapter"] is None  # nothing learned yet
    assert (await command(client, "dg.stopLearning"))["stopped"] is False
    started = await command(client, "dg.learnRepository", {"minutes": 0.15})
    assert started["started"] is True and Path(started["adapter"]).is_relative_to(CACHE)
    assert (await command(client, "dg.learnRepository", {"minutes": 0.15}))["started"] is False  # one at a time
    uri = (WORKSPACE / "m0.py").as_uri()
    open_doc(client, uri, "def area(width, height):\n    return \n")
    answered = 0
    while (await command(client, "dg.status"))["learning"]["running"]:
        result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
            context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
            text_document=types.TextDocumentIdentifier(uri), position=types.Position(1, 11)))
        answered += result is not None
        await asyncio.sleep(0.3)
    assert answered >= 2  # the served model answered while the other process trained
    status = await until(client, lambda s: (s.get("adapter") or {}).get("kind") == "full" and s["state"] == "ready")
    learning = status["learning"]
    assert learning["ok"] is True and learning["files"] == 3
    assert status["adapter"]["workspace"] == str(WORKSPACE) and status["adapter"]["path"] == started["adapter"]
    assert any("learned shapes" in m.message for m in client.messages)  # window/showMessage


def test_a_workspace_file_cannot_turn_adapters_on():
    settings, messages = Settings().update({"adapter": "workspace"}, trusted=False)
    assert settings.engine.adapter == "" and any("'adapter'" in m for m in messages)
    assert Settings().update({"adapter": "workspace"}, trusted=True)[0].engine.adapter == "workspace"
