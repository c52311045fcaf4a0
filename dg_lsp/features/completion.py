"""textDocument/completion: the same fill as a completion item, for clients without ghost text.

Clients filter completion items by the word before the cursor, so the item replaces that word
with the word plus the fill; `isIncomplete` makes the client ask again as the user types.
"""

from __future__ import annotations

import re

from lsprotocol import types

from ..fill import Fill, FillJob
from .base import Ready, WorkerFeature
from . import common

WORD_BEFORE = re.compile(r"[\w$]*$")
EMPTY = types.CompletionList(is_incomplete=True, items=[])


def prepare(server, params: types.CompletionParams):
    snapshot = common.usable_snapshot(server, params.text_document.uri)
    if snapshot is None:
        return Ready(EMPTY)
    offset = snapshot.codec(server.documents.encoding).offset(params.position)
    job = common.job_at(server, snapshot, offset, offset, "inline", n=server.settings.candidates)
    return job if job is not None else Ready(EMPTY)


def compute(server, job: FillJob, token) -> Fill | None:
    return common.compute(server, job, token)


def label(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else text
    return first if len(first) <= 60 else first[:57] + "..."


async def finish(server, job: FillJob, fill: Fill | None):
    if fill is None or not fill.texts:
        return EMPTY
    if common.hide_as_invalid(server, fill):
        server.record_fill("completion", job, fill, hidden=True)
        return EMPTY
    server.record_fill("completion", job, fill)
    text = job.snapshot.text
    line_start = text.rfind("\n", 0, job.start) + 1
    word = WORD_BEFORE.search(text[line_start : job.start]).group(0)
    codec = job.snapshot.codec(server.documents.encoding)
    rng = codec.range(job.start - len(word), job.start)
    result = []
    for rank, (fill_text, confidence) in enumerate(zip(fill.texts, fill.confidences)):
        result.append(
            types.CompletionItem(
                label=label(word + fill_text),
                kind=types.CompletionItemKind.Snippet,
                detail=f"dg-lsp ({confidence:.0%} confident)",
                documentation=types.MarkupContent(types.MarkupKind.Markdown, f"```\n{word + fill_text}\n```"),
                filter_text=word + fill_text,
                sort_text=f"0{rank}",
                text_edit=types.TextEdit(rng, word + fill_text),
                insert_text_format=types.InsertTextFormat.PlainText,
            )
        )
    return types.CompletionList(is_incomplete=True, items=result)


FEATURE = WorkerFeature(prepare, compute, finish, key=lambda job: ("completion", job.snapshot.uri))
