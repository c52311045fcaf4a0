"""A real LSP client session against `python -m dg_lsp serve`, for the typing and memory benchmarks.

The latency an editor sees includes JSON-RPC, the event loop, the scheduler and the worker, so
these benchmarks talk to the server the way an editor does: pygls' `LanguageClient` over stdio,
incremental `didChange` edits with UTF-16 ranges, requests sent without waiting for the previous
answer. `Server` starts the process (no user config, offline), waits until the model is loaded,
reads the process's CPU time and memory from /proc, and shuts it down. `Mirror` is the client's own
copy of a document, which sends each edit and is compared with the server's `dg.documentHash`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from .common import peak_rss_bytes, rss_parts_bytes, rss_bytes

CLK_TCK = os.sysconf("SC_CLK_TCK")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def utf16_position(text: str, offset: int) -> types.Position:
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    column = len(text[start:offset].encode("utf-16-le")) // 2
    return types.Position(line, column)


class Server:
    """One server process with a connected client; use as `async with Server(model) as s:`."""

    def __init__(self, model: str, *extra_args: str, options: dict | None = None, ready_timeout: float = 180.0,
                 python: str | None = None):
        self.model = model
        self.python = python or sys.executable  # another environment's interpreter: another install
        self.extra_args = extra_args
        self.options = options or {}
        self.ready_timeout = ready_timeout
        self.client = LanguageClient("dg-lsp-bench", "1")
        self.root = Path(tempfile.mkdtemp(prefix="dg-bench-ws-"))
        self.stderr_tail: list[str] = []
        self.pid = 0
        self.status: dict = {}

    async def __aenter__(self) -> "Server":
        env = dict(os.environ, DG_LSP_CONFIG="/nonexistent", HF_HUB_OFFLINE="1", DG_LSP_LOG=os.environ.get("DG_LSP_LOG", "WARNING"), TOKENIZERS_PARALLELISM="false")
        args = ["-m", "dg_lsp", "serve", "--model", self.model, *self.extra_args]
        await self.client.start_io(self.python, *args, env=env)
        self.pid = self.client._server.pid
        self._drain = asyncio.ensure_future(self._read_stderr())
        caps = types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=False),
            workspace=types.WorkspaceClientCapabilities(apply_edit=True),
            text_document=types.TextDocumentClientCapabilities(
                inline_completion=types.InlineCompletionClientCapabilities(),
                code_action=types.CodeActionClientCapabilities(
                    resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"])),
            ),
        )

        @self.client.feature(types.WORKSPACE_APPLY_EDIT)
        def apply(params):  # commands ask the editor to apply their edits; decline, like a busy editor
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="benchmark")

        @self.client.feature("dg/status")
        def status(params):
            pass

        await self.client.initialize_async(types.InitializeParams(
            capabilities=caps, process_id=os.getpid(), root_uri=self.root.as_uri(),
            initialization_options=self.options))
        self.client.initialized(types.InitializedParams())
        self.status = await self.wait_ready()
        if self.status.get("state") != "ready":
            raise RuntimeError(f"server not ready: {self.status}; stderr: {''.join(self.stderr_tail[-20:])}")
        return self

    async def __aexit__(self, *exc) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 30)
            self.client.exit(None)
            await asyncio.wait_for(self.client.stop(), 30)
        except Exception:
            if self.client._server is not None and self.client._server.returncode is None:
                self.client._server.kill()
        self._drain.cancel()
        shutil.rmtree(self.root, ignore_errors=True)

    async def _read_stderr(self) -> None:
        stream = self.client._server.stderr
        while True:
            line = await stream.readline()
            if not line:
                return
            self.stderr_tail = (self.stderr_tail + [line.decode(errors="replace")])[-200:]

    async def command(self, name: str, *args):
        return await self.client.workspace_execute_command_async(types.ExecuteCommandParams(name, list(args)))

    async def wait_ready(self) -> dict:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        while True:
            status = await self.command("dg.status")
            if status["state"] in ("ready", "error") or loop.time() > deadline:
                return status
            await asyncio.sleep(0.05)

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14 and 15)

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def peak_rss(self) -> int:
        return peak_rss_bytes(self.pid)

    def rss_parts(self) -> dict[str, int]:
        return rss_parts_bytes(self.pid)

    def uri(self, name: str) -> str:
        return (self.root / name).as_uri()


class Mirror:
    """The client's copy of one document: every edit is applied here and sent as a didChange."""

    def __init__(self, server: Server, name: str, text: str, language: str = "python"):
        self.server = server
        self.uri = server.uri(name)
        self.text = text
        self.version = 1
        server.client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(self.uri, language, self.version, text)))

    def replace(self, start: int, end: int, new: str) -> None:
        rng = types.Range(utf16_position(self.text, start), utf16_position(self.text, end))
        self.text = self.text[:start] + new + self.text[end:]
        self.version += 1
        self.server.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(version=self.version, uri=self.uri),
            content_changes=[types.TextDocumentContentChangePartial(range=rng, text=new)]))

    def position(self, offset: int) -> types.Position:
        return utf16_position(self.text, offset)

    def inline_params(self, offset: int) -> types.InlineCompletionParams:
        return types.InlineCompletionParams(
            context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Automatic),
            text_document=types.TextDocumentIdentifier(self.uri), position=self.position(offset))

    async def desynced(self) -> bool:
        """True when the server's text or version differs from this copy."""
        result = await self.server.command("dg.documentHash", {"uri": self.uri})
        return result != {"version": self.version, "sha256": sha256(self.text)}

    def close(self) -> None:
        self.server.client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(self.uri)))
