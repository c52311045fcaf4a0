"""Helpers for the end-to-end tests that drive the real server process over stdio."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import tempfile
from pathlib import Path

from lsprotocol import types



def tiny_model_dir() -> Path:
    """The tiny random model on disk, shared by the tests and the quick benchmarks."""
    from dg_engine.tiny import cached_tiny_dir

    return cached_tiny_dir()


def server_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "dg_lsp", "serve", *extra]


def server_env(tmp_config: Path | None = None) -> dict:
    env = dict(os.environ, DG_LSP_LOG="WARNING", HF_HUB_OFFLINE="1")
    # Keep the user's own config file out of the tests.
    env["DG_LSP_CONFIG"] = str(tmp_config or Path(tempfile.gettempdir()) / "dg-lsp-tests-no-config.toml")
    return env


def capabilities(encodings: list[str] | None = None, progress: bool = True) -> types.ClientCapabilities:
    general = types.GeneralClientCapabilities(
        position_encodings=[types.PositionEncodingKind(e) for e in encodings]) if encodings else None
    return types.ClientCapabilities(
        general=general,
        window=types.WindowClientCapabilities(work_done_progress=progress),
        workspace=types.WorkspaceClientCapabilities(apply_edit=True),
        text_document=types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities(),
            code_action=types.CodeActionClientCapabilities(
                resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"])),
        ),
    )


async def wait_ready(client, timeout: float = 60.0) -> dict:
    """Poll dg.status until the model is loaded (or failed)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = await command(client, "dg.status")
        if status["state"] in ("ready", "error") or asyncio.get_running_loop().time() > deadline:
            return status
        await asyncio.sleep(0.05)


async def open_session(client, tmp_path_factory, options: dict | None = None, timeout: float = 60.0) -> dict:
    """Initialize `client` on a fresh workspace folder (`client.root`) and wait for the model.

    `dg/status` notifications are accepted and dropped; returns the final `dg.status`.
    """

    @client.feature("dg/status")
    def status(params):
        pass

    root = tmp_path_factory.mktemp("ws")
    await client.initialize_session(types.InitializeParams(
        capabilities=capabilities(), root_uri=root.as_uri(), initialization_options=options))
    client.root = root
    return await wait_ready(client, timeout)


async def command(client, name: str, *args):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(name, list(args)))


def open_doc(client, uri: str, text: str, language: str = "python", version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, language, version, text)))


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def position_of(text: str, marker: str) -> tuple[str, types.Position]:
    """Remove `marker` from `text` and return (text, its UTF-16 position)."""
    offset = text.index(marker)
    text = text.replace(marker, "", 1)
    before = text[:offset]
    line = before.count("\n")
    col = len(before[before.rfind("\n") + 1 :].encode("utf-16-le")) // 2
    return text, types.Position(line, col)
