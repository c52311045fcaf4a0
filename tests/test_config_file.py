"""The user's dg-lsp.toml is read at start and watched; a workspace file cannot choose the model."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import capabilities, command, server_command, server_env, tiny_model_dir, wait_ready

CONFIG = Path(tempfile.mkdtemp(prefix="dg-user-config-")) / "dg-lsp.toml"
CONFIG.write_text(f'model = "{tiny_model_dir()}"\ncandidates = 3\nmax_steps = 3\n')
WORKSPACE = Path(tempfile.mkdtemp(prefix="dg-workspace-"))
(WORKSPACE / ".dg-lsp.toml").write_text('model = "/somewhere/else"\ncontext_budget = 512\n')


@pytest_lsp.fixture(config=ClientServerConfig(server_command=server_command(), server_env=server_env(CONFIG)), scope="module")
async def client(lsp_client: LanguageClient):
    @lsp_client.feature("dg/status")
    def status(params):
        pass

    await lsp_client.initialize_session(types.InitializeParams(capabilities=capabilities(), root_uri=WORKSPACE.as_uri()))
    status = await wait_ready(lsp_client)
    assert status["state"] == "ready", status
    yield
    await lsp_client.shutdown_session()


async def test_user_file_chooses_the_model_and_workspace_file_cannot(client):
    status = await command(client, "dg.status")
    assert status["model"] == str(tiny_model_dir())
    assert status["settings"]["candidates"] == 3 and status["settings"]["contextBudget"] == 512
    assert any("'model' can only be set in your user settings" in m.message for m in client.messages)


async def test_a_changed_user_file_is_picked_up(client):
    CONFIG.write_text(f'model = "{tiny_model_dir()}"\ncandidates = 5\nmax_steps = 3\n')
    for _ in range(200):
        status = await command(client, "dg.status")
        if status["settings"]["candidates"] == 5:
            break
        await asyncio.sleep(0.05)
    assert status["settings"]["candidates"] == 5
    assert status["state"] == "ready" and status["model"] == str(tiny_model_dir())
