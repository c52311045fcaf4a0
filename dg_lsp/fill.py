"""From a document snapshot and a range to ranked, cleaned-up fills: the one fill pipeline.

Every feature (ghost text, completion items, code actions, commands) goes through `run_fill`:
tree-sitter context around the hole, the engine, then post-processing (suffix overlap, end of
the syntactic unit, indentation) and ranking that prefers candidates which add no syntax error.
It runs on the compute worker and touches nothing but its arguments.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Callable

from dg_engine import Engine, FillRequest

from .documents import Snapshot
from .settings import Settings
from .syntax import Budget, HoleContext, HoleKind, extract_context, language_for, postprocess, rank

# A byte-level BPE on code averages a little over three characters per token; cutting context by
# this estimate avoids tokenizing the whole file on every keystroke.
CHARS_PER_TOKEN = 3.2


def estimate_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1


@dataclass(frozen=True)
class FillJob:
    """Everything a fill needs, captured on the event loop; immutable so the worker can own it."""

    snapshot: Snapshot
    start: int
    end: int
    mode: str  # "inline" | "fim" | "body" | "holes" | "rewrite" | "paragraph"
    settings: Settings
    chunks: tuple[str, ...] = ()
    instruction: str | None = None
    n: int = 1
    max_canvases: int = 1
    seed: int = 0


@dataclass
class Fill:
    start: int
    end: int
    texts: list[str]  # best first
    confidences: list[float]  # mean confidence of each text
    low_confidence: list[tuple[int, int, float]] = field(default_factory=list)  # spans in texts[0]
    latency_ms: float = 0.0
    steps: int = 0
    kind: str = ""


def context_for(job: FillJob) -> tuple[HoleContext, object]:
    spec = language_for(job.snapshot.language_id, job.snapshot.uri)
    budget = job.settings.context_budget
    ctx = extract_context(
        job.snapshot.text, job.start, job.end, spec,
        Budget(prefix_tokens=budget * 3 // 4, suffix_tokens=budget // 4), estimate_tokens,
    )
    return ctx, spec


class ResultCache:
    """Recent fills keyed by their exact context, so asking again costs no model call."""

    def __init__(self, size: int = 64):
        self.size = size
        self._items: OrderedDict[int, Fill] = OrderedDict()
        self.hits = 0

    def get(self, key: int) -> Fill | None:
        fill = self._items.get(key)
        if fill is not None:
            self._items.move_to_end(key)
            self.hits += 1
        return fill

    def put(self, key: int, fill: Fill) -> None:
        self._items[key] = fill
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


def run_fill(
    engine: Engine, job: FillJob, cancel, on_step: Callable | None = None, cache: ResultCache | None = None
) -> Fill:
    started = time.perf_counter()
    ctx, spec = context_for(job)
    key = hash((ctx.prefix, ctx.suffix, ctx.selected, job.chunks, job.mode, job.n, job.instruction, job.seed))
    cached = cache.get(key) if cache is not None else None
    if cached is not None:
        return replace(cached, start=ctx.start, end=ctx.end, latency_ms=(time.perf_counter() - started) * 1000)
    fill = _fill(engine, job, ctx, spec, cancel, on_step, started)
    if cache is not None and fill.texts:
        cache.put(key, fill)
    return fill


def _fill(engine, job: FillJob, ctx, spec, cancel, on_step, started: float) -> Fill:
    rewriting = job.mode in ("rewrite", "paragraph")
    request = FillRequest(
        prefix=ctx.prefix,
        suffix=ctx.suffix,
        n=job.n,
        chunks=job.chunks,
        max_canvases=job.max_canvases,
        seed=job.seed,
        canvas_length=job.settings.engine.canvas_length,
        max_steps=job.settings.engine.max_steps,
        entropy_bound=job.settings.engine.entropy_bound,
        seed_text=ctx.selected if rewriting else None,
        instruction=job.instruction,
    )
    result = engine.fill(request, cancel=cancel, on_step=on_step)
    cleaned = []
    for cand in result.candidates:
        text = cand.text if rewriting else postprocess(cand.text, ctx, spec)
        cleaned.append((text, cand.mean_confidence, cand))
    order = rank([(t, c) for t, c, _ in cleaned], ctx, spec) if not rewriting else range(len(cleaned))
    texts, confidences, seen, best = [], [], set(), None
    for i in order:
        text, conf, cand = cleaned[i]
        if text in seen or (not text.strip() and job.mode == "inline"):
            continue
        seen.add(text)
        texts.append(text)
        confidences.append(conf)
        best = best or cand
    low = low_confidence_spans(best, texts[0], job.settings.confidence_threshold) if best and texts else []
    return Fill(
        start=ctx.start,
        end=ctx.end,
        texts=texts,
        confidences=confidences,
        low_confidence=low,
        latency_ms=(time.perf_counter() - started) * 1000,
        steps=best.steps if best else 0,
        kind=ctx.kind.value if isinstance(ctx.kind, HoleKind) else str(ctx.kind),
    )


def low_confidence_spans(candidate, shown: str, threshold: float) -> list[tuple[int, int, float]]:
    """Spans of `shown` whose tokens the model was unsure of, merged when adjacent.

    Post-processing only cuts the end of a fill or re-indents it, so a token span is kept when it
    still lies within the part of the raw text that `shown` begins with.
    """
    raw = candidate.text
    common = 0
    while common < min(len(raw), len(shown)) and raw[common] == shown[common]:
        common += 1
    spans: list[tuple[int, int, float]] = []
    for (a, b), p in zip(candidate.token_offsets, candidate.confidences):
        if p >= threshold or b > common or not raw[a:b].strip():
            continue
        if spans and spans[-1][1] >= a:
            spans[-1] = (spans[-1][0], b, min(spans[-1][2], p))
        else:
            spans.append((a, b, p))
    return spans
