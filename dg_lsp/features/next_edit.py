"""dg/nextEdit: the edits the user's latest edit implies, and the debounced background run.

Two ways in:

* the request `dg/nextEdit` (`{textDocument, position}` -> `{edits, confidence, version}` or null), LATEST
  per document like ghost text: the editors ask after their own pause and draw the answer;
* for clients that know nothing of it, `NextEdits` runs the same job after the user pauses
  (`nextEdit.debounceMs`) and keeps the answer, which the code-action list offers as "DG: Apply
  the suggested edit". It stops doing so once a client asks for `dg/nextEdit` itself.

Any change to the document cancels the job computing for it and forgets its suggestion: edits
for an older text would land in the wrong place.
"""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from dg_engine import Cancelled, EngineError

from ..next_edit import NextEditJob, Suggestion, suggest
from .base import Ready, WorkerFeature
from . import common

log = logging.getLogger(__name__)

APPLY_TITLE = "DG: Apply the suggested edit"
APPLY_KIND = "refactor.dg.nextEdit"


def _key(uri: str) -> tuple[str, str]:
    return ("nextEdit", uri)


def _plain(value):
    """pygls hands a custom method's params over as named tuples; they are read as dicts."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    return value


def _arguments(server, params) -> tuple[str, types.Position]:
    raw = _plain(params)
    try:
        uri = raw["textDocument"]["uri"]
        position = server.converter.structure(raw["position"], types.Position)
    except Exception:
        raise JsonRpcInvalidParams("dg/nextEdit takes {textDocument: {uri}, position: {line, character}}") from None
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams("dg/nextEdit: textDocument.uri must be a string")
    return uri, position


def job_for(server, uri: str, offset: int | None = None, position: types.Position | None = None):
    """The job for a document's current text, or None when there is nothing to suggest from."""
    if not server.settings.next_edit_enabled or server.host.engine is None:
        return None
    snapshot = common.usable_snapshot(server, uri)
    hunks = server.history.recent(uri)
    if snapshot is None or not hunks:
        return None
    if offset is None:
        offset = snapshot.codec(server.documents.encoding).offset(position) if position else 0
    return NextEditJob(snapshot, offset, tuple(hunks), server.history.undone(uri), server.settings)


def reply(server, suggestion: Suggestion | None) -> dict | None:
    snapshot = server.documents.snapshot(suggestion.uri) if suggestion else None
    if snapshot is None or snapshot.version != suggestion.version:
        return None
    codec = snapshot.codec(server.documents.encoding)
    edits = [{**server.converter.unstructure(types.TextEdit(codec.range(a, b), text)), "confidence": round(c, 3)}
             for a, b, text, c in suggestion.edits]
    # The version lets a client drop an answer that crossed a newer edit of its own.
    return {"edits": edits, "confidence": round(suggestion.confidence, 3), "version": suggestion.version}


def prepare(server, params):
    uri, position = _arguments(server, params)
    server.next_edits.client_pulls = True
    snapshot = server.documents.snapshot(uri)
    stored = server.next_edits.stored(uri, snapshot.version) if snapshot else None
    if stored is not None:
        return Ready(reply(server, stored))
    job = job_for(server, uri, position=position)
    return job if job is not None else Ready(None)


def compute(server, job: NextEditJob, token) -> Suggestion | None:
    engine = server.host.engine
    return suggest(engine, job, token) if engine is not None else None


async def finish(server, job: NextEditJob, suggestion: Suggestion | None):
    server.next_edits.record(job, suggestion)
    return reply(server, suggestion)


FEATURE = WorkerFeature(prepare, compute, finish, key=lambda job: _key(job.snapshot.uri))


class NextEdits:
    """Per-document suggestions, the debounce timers, and counts for dg.status."""

    def __init__(self, server):
        self.server = server
        self.client_pulls = False
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._stored: dict[str, Suggestion] = {}
        self.computed = 0
        self.proposed = 0
        self.cancelled = 0

    def stored(self, uri: str, version: int) -> Suggestion | None:
        s = self._stored.get(uri)
        return s if s is not None and s.version == version else None

    def record(self, job: NextEditJob, suggestion: Suggestion | None) -> None:
        self.computed += 1
        current = self.server.documents.snapshot(job.snapshot.uri)
        if suggestion is not None and current is not None and current.version == suggestion.version:
            self.proposed += 1
            self._stored[suggestion.uri] = suggestion
            self.server.host.latencies.record("nextEdit", suggestion.latency_ms)

    def changed(self, uri: str) -> None:
        """A change arrived: the running job and the kept suggestion are for an older text."""
        self._stored.pop(uri, None)
        if self.server.scheduler.cancel(_key(uri), "the document changed"):
            self.cancelled += 1
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        loop = self.server.loop
        if self.client_pulls or not self.server.settings.next_edit_enabled or loop is None:
            return
        self._timers[uri] = loop.call_later(self.server.settings.next_edit_debounce_ms / 1000, self._fire, uri)

    def closed(self, uri: str) -> None:
        self._stored.pop(uri, None)
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        self.server.scheduler.cancel(_key(uri), "the document was closed")

    def _fire(self, uri: str) -> None:
        self._timers.pop(uri, None)
        job = job_for(self.server, uri)
        if job is None:
            return
        future, _ = self.server.scheduler.submit(lambda token: compute(self.server, job, token), supersedes=_key(uri))
        future.add_done_callback(lambda f: self._done(job, f))

    def _done(self, job: NextEditJob, future: asyncio.Future) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if isinstance(error, Cancelled):
            return
        if isinstance(error, EngineError):
            self.server.engine_failed(str(error))
            return
        if error is not None:
            log.error("next-edit job failed", exc_info=error)
            return
        self.record(job, future.result())

    def action(self, snapshot) -> types.CodeAction | None:
        """The kept suggestion for this version of the document, as a code action with its edit."""
        from .code_actions import workspace_edit

        s = self.stored(snapshot.uri, snapshot.version)
        if s is None:
            return None
        edit = workspace_edit(self.server, snapshot, [(a, b, t) for a, b, t, _ in s.edits])
        return types.CodeAction(title=APPLY_TITLE, kind=APPLY_KIND, edit=edit, is_preferred=True)

    def status(self) -> dict:
        return {"enabled": self.server.settings.next_edit_enabled, "computed": self.computed,
                "proposed": self.proposed, "cancelled": self.cancelled, "clientPulls": self.client_pulls}
