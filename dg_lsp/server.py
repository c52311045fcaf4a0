"""The language server: state shared by the features, route registration, and `serve`.

`DgServer` holds the document store, the settings, the engine host, the scheduler and the caches.
Feature modules (in `features/`) are plain functions of (server, params); `register` wires each
route of `routes.ROUTES` into pygls according to its execution policy. Nothing here runs the
model: that happens only inside worker jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pygls.lsp.server import LanguageServer

from dg_engine import Cancelled, EngineConfig, EngineError, OutOfMemoryError

from . import __version__, lifetime
from .confidence import ConfidenceTracker
from .crossfile import ChunkIndex, inside, uri_path
from .documents import DocumentStore
from .edit_history import EditHistory
from .engine_host import EngineHost
from .features.next_edit import NextEdits
from .learning import Learner
from .logs import configure_logging
from .fill import ResultCache
from .progress import progress
from .protocol import DgProtocol, install_test_faults
from .transport import start_io, start_tcp
from .routes import ROUTES, Policy, Ready, Route, WorkerFeature
from .scheduler import Scheduler
from .settings import Settings
from .syntax_trees import make_tree
from .userconfig import ConfigFiles

log = logging.getLogger("dg_lsp")


class DgServer(LanguageServer):
    def __init__(self, engine_override: EngineConfig | None = None, loader=None):
        super().__init__("dg-lsp", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=DgProtocol)  # hardened framing, lifecycle and replies (protocol.py)
        self.documents = DocumentStore(make_tree)
        self.scheduler = Scheduler()
        self.host = EngineHost(loader) if loader else EngineHost()
        self.settings = Settings()
        self.engine_override = engine_override
        self.results = ResultCache()
        self.chunks = ChunkIndex()
        self.shown: dict = {}
        self.confidence = ConfidenceTracker()
        self.history = EditHistory()
        self.next_edits = NextEdits(self)
        self.learner = Learner(self)
        self.typeahead_hits = 0
        self.last_fill: dict = {}  # what the most recent fill did, shown by dg.status
        self.folders: list[Path] = []
        self.config_files = ConfigFiles()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._logged: set[str] = set()
        self._load_progress: asyncio.Future | None = None
        self.editor_values: dict = {}
        self.engine_failure: str | None = None  # the last engine error, until a request succeeds
        self.converter = self.protocol._converter
        self.host.listeners.append(self._on_engine_state)

    # --- Settings and model -------------------------------------------------------------------

    def apply_settings(self, values: dict, trusted: bool, source: str, load: bool) -> None:
        """Apply editor settings on top of the current ones (and remember them for rebuilds)."""
        self.editor_values = {**self.editor_values, **values}
        self._set_settings(self.settings.update(values, trusted=trusted), source, load)

    def _set_settings(self, update: tuple[Settings, list[str]], source: str, load: bool) -> None:
        before = self.settings.engine
        self.settings, messages = update
        if self.engine_override is not None:
            # Options given on the command line win over every other source.
            self.settings = self.settings.update(_engine_dict(self.engine_override))[0]
        for message in messages:
            self.show_warning(f"dg-lsp settings ({source}): {message}")
        # Fills made under the old settings must not come back from the cache or typed-ahead.
        self.results.clear()
        self.shown.clear()
        if load and self.settings.engine.load_key() != before.load_key():
            self.host.load(self.engine_config())

    def rebuild_settings(self, load: bool) -> None:
        """Settings from scratch: defaults, then the config files, then the editor's settings.

        Run at start and whenever a config file changes, so that removing a key from a file
        really brings back the default (or the editor's value).
        """
        settings, messages = Settings(), []
        for values, trusted, source in self.config_files.read(self.folders):
            settings, problems = settings.update(values, trusted=trusted)
            messages += [f"{source}: {p}" for p in problems]
        # The editor's own invalid values were reported when they arrived; not again here.
        settings = settings.update(self.editor_values, trusted=True)[0]
        messages += self.config_files.problems
        self._set_settings((settings, messages), "config", load)

    def start_model(self) -> None:
        self.host.load(self.engine_config())

    def engine_config(self) -> EngineConfig:
        """The engine settings with `adapter` resolved: "off", "workspace" (the workspace's adapter
        in the user's cache, when one has been learned) or a directory."""
        config = self.settings.engine
        choice = config.adapter
        if choice in ("", "off"):
            path = ""
        elif choice == "workspace":
            from dg_engine.adapt import default_location

            found = [default_location(f) / "adapter" for f in self.folders]
            path = next((str(p) for p in found if (p / "adapter.json").is_file()), "")
        else:
            path = choice
        return dataclasses.replace(config, adapter=path)

    def reload_model(self, force: bool = False) -> None:
        self.host.load(self.engine_config(), force=force)

    def start_config_watcher(self) -> None:
        self.config_files.watch(self, self.folders)

    def reload_config(self) -> None:
        """Called when a config file changes: rebuild settings, reload the model if it changed."""
        self.rebuild_settings(load=True)

    def _on_engine_state(self, state: str, message: str) -> None:
        self.notify_threadsafe("dg/status", {"state": state, "message": message, "lastLatencyMs": self.host.latencies.last()})
        if state == "error":
            self.show_message_threadsafe(f"dg-lsp: the model could not be loaded: {message}", types.MessageType.Error)
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._loading_progress, state, message)

    def _loading_progress(self, state: str, message: str) -> None:
        """A progress report from the start of a model load to its end."""
        if state == "loading" and self._load_progress is None:
            self._load_progress = asyncio.get_running_loop().create_future()
            done = self._load_progress

            async def report() -> None:
                async with progress(self, "dg-lsp: loading the model", message):
                    await done

            asyncio.get_running_loop().create_task(report())
        elif state != "loading" and self._load_progress is not None:
            self._load_progress.set_result(None)
            self._load_progress = None

    def status(self) -> dict:
        return {
            **self.host.status(),
            "documents": len(self.documents.uris()),
            "superseded": self.scheduler.superseded,
            "typedAheadHits": self.typeahead_hits,
            "cacheHits": self.results.hits,
            "lastEngineError": self.engine_failure,
            "lastFill": self.last_fill,
            "positionEncoding": self.documents.encoding,
            "nextEdit": self.next_edits.status(),
            "learning": self.learner.status(),
            "settings": {"candidates": self.settings.candidates, "contextBudget": self.settings.context_budget,
                         "confidenceDisplay": self.settings.confidence_display, "drafts": self.settings.drafts,
                         "syntaxRepair": self.settings.syntax_repair, "repairRounds": self.settings.repair_rounds,
                         "variableLength": self.settings.variable_length,
                         "inlineValidOnly": self.settings.inline_valid_only,
                         "inlineRepairBudgetMs": self.settings.inline_repair_budget_ms},
        }

    def record_fill(self, feature: str, job, fill, hidden: bool = False) -> None:
        """Latency for dg.status and the status bar; low-confidence spans to show once applied.

        A `hidden` fill was made but not shown (see `features.common.hide_as_invalid`): dg.status
        says so, and it has no spans to show since it can never be applied."""
        self.host.latencies.record(feature, fill.latency_ms)
        self.last_fill = {"feature": feature, "kind": fill.kind, "steps": fill.steps,
                          "latencyMs": round(fill.latency_ms, 1), **fill.trace, "hidden": hidden}
        self.notify_threadsafe("dg/status", {"state": self.host.state, "message": self.host.message, "lastLatencyMs": round(fill.latency_ms, 1)})
        if fill.texts and not hidden and self.settings.confidence_display != "off":
            self.confidence.offer(job.snapshot.uri, fill.start, fill.texts[0], fill.low_confidence)

    # --- Refining ghost text ----------------------------------------------------------------------

    def draft_reporter(self, job, token):
        """A callback for the worker that sends each step's draft as `dg/draft`, if enabled."""
        if not self.settings.drafts:
            return None
        uri = job.snapshot.uri
        position = job.snapshot.codec(self.documents.encoding).position(job.start)
        where = {"line": position.line, "character": position.character}
        last = {"text": None}

        def report(text: str) -> None:
            if token.is_cancelled() or text == last["text"]:
                return
            last["text"] = text
            self.notify_threadsafe("dg/draft", {"uri": uri, "position": where, "text": text, "final": False})

        return report

    def final_draft(self, job, text: str) -> None:
        if self.settings.drafts:
            position = job.snapshot.codec(self.documents.encoding).position(job.start)
            self._notify("dg/draft", {"uri": job.snapshot.uri, "position": {"line": position.line, "character": position.character},
                                      "text": text, "final": True})

    # --- Confidence -------------------------------------------------------------------------------

    def publish_confidence(self, uri: str) -> None:
        display = self.settings.confidence_display
        snapshot = self.documents.snapshot(uri)
        if snapshot is None:
            return
        spans = self.confidence.spans(uri) if display in ("diagnostics", "both") else []
        codec = snapshot.codec(self.documents.encoding)
        diagnostics = [
            types.Diagnostic(
                range=codec.range(s.start, s.end),
                message=f"dg-lsp was only {s.confidence:.0%} confident of this text",
                severity=types.DiagnosticSeverity.Hint,
                code="dg.low-confidence",
                source="dg-lsp",
            )
            for s in spans
        ]
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=snapshot.version))
        if display in ("inlayHints", "both"):
            caps = self.client_capabilities.workspace if self.client_capabilities else None
            if caps and caps.inlay_hint and caps.inlay_hint.refresh_support:
                self.workspace_inlay_hint_refresh(None)

    # --- Workspace ----------------------------------------------------------------------------

    def set_workspace_folders(self, params: types.InitializeParams) -> None:
        uris = [f.uri for f in params.workspace_folders or []] or ([params.root_uri] if params.root_uri else [])
        self.folders = [p.resolve() for p in (uri_path(u) for u in uris) if p is not None]

    def in_workspace(self, uri: str) -> bool:
        return inside(uri, self.folders)

    def workspace_snapshots(self):
        """Open documents and recently closed ones, inside the workspace folders only."""
        snaps = [self.documents.snapshot(u) for u in self.documents.uris()] + self.chunks.recent()
        return [s for s in snaps if s is not None and self.in_workspace(s.uri)]

    def on_document_changed(self, uri: str, edits: list[tuple[int, int, int]]) -> None:
        snapshot = self.documents.snapshot(uri)
        if snapshot is None:
            return
        self.history.changed(uri, snapshot.text, edits)
        self.next_edits.changed(uri)
        if self.confidence.edited(uri, edits, snapshot.text):
            self.publish_confidence(uri)

    # --- Messages -------------------------------------------------------------------------------

    def notify_threadsafe(self, method: str, params) -> None:
        if self.loop is None or self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self._notify, method, params)

    def _notify(self, method: str, params) -> None:
        try:
            self.protocol.notify(method, params)
        except Exception:
            log.debug("could not send %s", method, exc_info=True)

    def show_message_threadsafe(self, message: str, kind: types.MessageType) -> None:
        self.notify_threadsafe(types.WINDOW_SHOW_MESSAGE, types.ShowMessageParams(kind, message))

    def engine_failed(self, message: str) -> None:
        log.warning("engine request failed: %s", message)
        if self.engine_failure is None:
            self.show_message_threadsafe(f"dg-lsp: {message}; features answer empty until it works again",
                                         types.MessageType.Error)
        self.engine_failure = message

    def show_warning(self, message: str) -> None:
        log.warning(message)
        self.show_message_threadsafe(message, types.MessageType.Warning)

    def log_once(self, message: str) -> None:
        if message not in self._logged:
            self._logged.add(message)
            log.info(message)
            self.notify_threadsafe(types.WINDOW_LOG_MESSAGE, types.LogMessageParams(types.MessageType.Info, message))

    def log_debug(self, message: str) -> None:
        log.debug(message)

    # --- Process ------------------------------------------------------------------------------

    def watch_parent(self, pid: int | None) -> None:
        """Exit when the editor's process dies, so an orphaned server never holds the model."""
        lifetime.watch_parent(pid)

    def release(self) -> None:
        self.scheduler.shutdown()
        self.host.engine = None


def _engine_dict(config: EngineConfig) -> dict:
    keys = ("model", "device", "dtype", "quantization", "canvas_length", "max_steps", "threads", "adapter", "prompt_format")
    return {k: getattr(config, k) for k in keys if getattr(config, k) != getattr(EngineConfig(), k)}


def _loop_handler(server: DgServer, route: Route):
    def handler(params):
        if server.loop is None:
            server.loop = asyncio.get_running_loop()
        return route.handler(server, params)

    return handler


async def run_worker_feature(server: DgServer, route: Route, *args):
    """prepare on the loop, compute on the worker (cancellable), finish on the loop."""
    feature: WorkerFeature = route.handler
    job = feature.prepare(server, *args)
    if isinstance(job, Ready):
        return job.value
    key = feature.key(job) if (route.policy is Policy.LATEST and feature.key) else None
    # Deliberate, slower actions (code actions, commands) show progress; ghost text never does.
    title = None
    if route.policy is not Policy.LATEST:
        title = f"dg-lsp: {args[0]}" if route.method == types.WORKSPACE_EXECUTE_COMMAND else "dg-lsp: filling"
    try:
        async with progress(server, title) if title else contextlib.nullcontext():
            result = await server.scheduler.run(lambda token: feature.compute(server, job, token), supersedes=key)
    except Cancelled as exc:
        raise JsonRpcRequestCancelled(str(exc)) from None
    except OutOfMemoryError as exc:
        server.show_warning(f"dg-lsp: {exc}; this request was dropped, the model stays loaded")
        result = None
    except EngineError as exc:
        # A backend that cannot answer (a remote server that is down or failing): empty results,
        # and one message until a request succeeds again, not one per keystroke.
        server.engine_failed(str(exc))
        result = None
    else:
        server.engine_failure = None
    return await feature.finish(server, job, result)


def _command_handler(server: DgServer, route: Route, name: str):
    # pygls matches a command's arguments to the handler's parameters, so the handler takes *args.
    async def command(*args):
        return await run_worker_feature(server, route, name, list(args))

    return command


def register(server: DgServer) -> None:
    for route in ROUTES:
        if route.policy is Policy.LOOP:
            server.feature(route.method, route.options)(_loop_handler(server, route))
        elif route.method == types.WORKSPACE_EXECUTE_COMMAND:
            from .features.commands import COMMANDS

            for name in COMMANDS:
                server.command(name)(_command_handler(server, route, name))
        else:
            async def worker(params, _route=route):
                return await run_worker_feature(server, _route, params)

            server.feature(route.method, route.options)(worker)


def build_server(engine_override: EngineConfig | None = None, loader=None) -> DgServer:
    server = DgServer(engine_override, loader)
    register(server)
    install_test_faults(server)  # only with DG_LSP_TEST_FAULTS=1; see protocol.py
    return server


def serve(config: EngineConfig | None = None, tcp: str | None = None) -> int:
    configure_logging(os.environ.get("DG_LSP_LOG", "INFO"))
    override = config if config is not None and config != EngineConfig() else None
    server = build_server(override)
    if override is not None:
        server.settings = server.settings.update(_engine_dict(override))[0]
    if tcp:
        host, _, port = tcp.rpartition(":")
        start_tcp(server, host or "127.0.0.1", int(port))  # transport.py: the same hardened reader
    else:
        start_io(server)  # capped framing; exits on `exit` and at end of input
    return 0
