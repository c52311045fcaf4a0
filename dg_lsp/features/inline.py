"""textDocument/inlineCompletion: ghost text for the hole at the cursor.

Runs with the LATEST policy: a newer request for the same document supersedes this one. Before
running the model it tries typed-ahead reuse: when the user has typed the first characters of the
suggestion shown last, the rest of it is the answer, at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types

from ..fill import Fill, FillJob
from .base import Ready, WorkerFeature
from . import common


@dataclass(frozen=True)
class Shown:
    """The last suggestion shown in a document, and what the text around it was."""

    offset: int
    before: int  # hash of the text before the cursor
    after: int  # hash of the text after the cursor
    text: str


def typed_ahead(shown: Shown | None, text: str, offset: int) -> str | None:
    """The rest of the shown suggestion when the user has typed its start; None otherwise."""
    if shown is None or offset < shown.offset or offset - shown.offset >= len(shown.text):
        return None
    typed = text[shown.offset : offset]
    if not shown.text.startswith(typed):
        return None
    if hash(text[: shown.offset]) != shown.before or hash(text[offset:]) != shown.after:
        return None
    return shown.text[len(typed) :]


def items(texts: list[str], position: types.Position) -> types.InlineCompletionList:
    rng = types.Range(position, position)
    return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=t, range=rng) for t in texts])


EMPTY = types.InlineCompletionList(items=[])


def prepare(server, params: types.InlineCompletionParams):
    if not server.settings.inline_enabled:
        return Ready(EMPTY)
    snapshot = common.usable_snapshot(server, params.text_document.uri)
    if snapshot is None:
        return Ready(EMPTY)
    offset = snapshot.codec(server.documents.encoding).offset(params.position)
    rest = typed_ahead(server.shown.get(snapshot.uri), snapshot.text, offset)
    if rest:
        server.typeahead_hits += 1
        return Ready(items([rest], params.position))
    job = common.job_at(server, snapshot, offset, offset, "inline", n=server.settings.candidates)
    return job if job is not None else Ready(EMPTY)


def compute(server, job: FillJob, token) -> Fill | None:
    return common.compute(server, job, token, on_draft=server.draft_reporter(job, token))


async def finish(server, job: FillJob, fill: Fill | None):
    if fill is not None and fill.texts and common.hide_as_invalid(server, fill):
        server.record_fill("inline", job, fill, hidden=True)
        fill = None
    server.final_draft(job, fill.texts[0] if fill and fill.texts else "")
    if fill is None or not fill.texts:
        return EMPTY
    server.record_fill("inline", job, fill)
    text = job.snapshot.text
    server.shown[job.snapshot.uri] = Shown(job.start, hash(text[: job.start]), hash(text[job.start :]), fill.texts[0])
    position = job.snapshot.codec(server.documents.encoding).position(job.start)
    return items(fill.texts, position)


FEATURE = WorkerFeature(prepare, compute, finish, key=lambda job: ("inline", job.snapshot.uri))
