"""Shared steps of the model-backed features: snapshot the document, build the fill job, run it.

Handlers call `job_at` on the event loop (it only reads the document store and settings) and
`compute` on the worker. A document that is too large, not UTF-8 text, in a disabled language or
not open gets no job, only a log line, so the feature answers empty instead of failing.
"""

from __future__ import annotations

import logging

from ..documents import Snapshot
from ..fill import Fill, FillJob, run_fill
from ..joint import run_joint

log = logging.getLogger(__name__)

CROSS_FILE_BUDGET_CHARS = 1600


def usable_snapshot(server, uri: str) -> Snapshot | None:
    snapshot = server.documents.snapshot(uri)
    if snapshot is None:
        log.info("request for %s, which is not open", uri)
        return None
    if snapshot.too_large:
        server.log_once(f"{uri} is over the size limit; dg-lsp does not complete in it")
        return None
    if "\x00" in snapshot.text[:8192]:
        server.log_once(f"{uri} looks binary; dg-lsp does not complete in it")
        return None
    if snapshot.language_id not in server.settings.languages and not snapshot.uri.startswith("untitled:"):
        return None
    return snapshot


def job_at(server, snapshot: Snapshot, start: int, end: int, mode: str, **extra) -> FillJob | None:
    if server.host.engine is None:
        return None
    settings = server.settings
    chunks = ()
    if settings.cross_file_context and mode not in ("rewrite", "paragraph"):
        others = [s for s in server.workspace_snapshots() if s.uri != snapshot.uri]
        if others and server.in_workspace(snapshot.uri):
            chunks = server.chunks.best(snapshot, start, others, CROSS_FILE_BUDGET_CHARS)
    return FillJob(snapshot=snapshot, start=start, end=end, mode=mode, settings=settings, chunks=chunks, **extra)


def compute(server, job: FillJob, token, on_draft=None) -> Fill | None:
    engine = server.host.engine
    if engine is None:
        return None
    return run_fill(engine, job, token, on_draft=on_draft, cache=server.results)


def compute_joint(server, job: FillJob, token):
    engine = server.host.engine
    if engine is None:
        return [], None
    return run_joint(engine, job, list(job.holes), token)


def hide_as_invalid(server, fill: Fill) -> bool:
    """Whether an as-you-type suggestion should not be shown because it would break the file.

    With `inline.validOnly`, ghost text and completion-fallback items are shown only when the
    best fill adds no syntax error. The texts are ranked error-free first, so when the best one
    adds an error they all do. Commands and code actions are asked for, so they always answer.
    """
    return server.settings.inline_valid_only and bool(fill.trace.get("addsSyntaxErrors"))
