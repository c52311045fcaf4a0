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
from dg_engine.prompt import clean_chat_answer
from dg_engine.proofread import WORD as PLAIN_WORD

from .documents import Snapshot
from .settings import Settings
from .syntax import (
    Budget, DocumentTree, HoleContext, HoleKind, adds_syntax_errors, extract_context, language_for, postprocess, rank,
)
from .syntax import tree as syntax_tree

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
    holes: tuple[tuple[int, int], ...] = ()  # a joint fill of several holes (start, end)


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
    # What the pipeline did, for dg.status: repair rounds run, canvas lengths tried and chosen.
    trace: dict = field(default_factory=dict)


def context_for(job: FillJob) -> tuple[HoleContext, object]:
    """The hole's context, read from the snapshot's own tree; parsed once here when it has none."""
    snapshot = job.snapshot
    spec = language_for(snapshot.language_id, snapshot.uri)
    tree = snapshot.tree
    if spec is not None and tree is None:
        tree = syntax_tree.parse(snapshot.text, spec)
    budget = job.settings.context_budget
    ctx = extract_context(
        snapshot.text, job.start, job.end, spec,
        Budget(prefix_tokens=budget * 3 // 4, suffix_tokens=budget // 4), estimate_tokens, tree=tree,
    )
    if tree is not None:
        # When the context is the whole document, the syntax checks' "without the fill" text is
        # the snapshot's text, whose errors this tree already shows.
        syntax_tree.remember_errors(snapshot.text, spec, tree)
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
    engine: Engine, job: FillJob, cancel, on_draft: Callable[[str], None] | None = None,
    cache: ResultCache | None = None,
) -> Fill:
    """Fill one hole (or rewrite one range). `on_draft` gets the cleaned-up text after each step."""
    started = time.perf_counter()
    ctx, spec = context_for(job)
    key = hash((ctx.prefix, ctx.suffix, ctx.selected, job.chunks, job.mode, job.n, job.instruction, job.seed,
                job.settings.engine, job.settings.syntax_repair, job.settings.repair_rounds,
                job.settings.inline_repair_budget_ms, job.settings.variable_length))
    cached = cache.get(key) if cache is not None else None
    if cached is not None:
        return replace(cached, start=ctx.start, end=ctx.end, latency_ms=(time.perf_counter() - started) * 1000)
    fill = _fill(engine, job, ctx, spec, cancel, _drafts(engine, ctx, spec, on_draft), started)
    if cache is not None and fill.texts:
        cache.put(key, fill)
    return fill


def _drafts(engine: Engine, ctx, spec, on_draft):
    """A step callback that turns the best row of each draft canvas into cleaned-up text."""
    if on_draft is None:
        return None
    rewriting = ctx.kind is HoleKind.SELECTION or ctx.kind is HoleKind.PARAGRAPH

    def on_step(index: int, canvas) -> None:
        text = engine.draft_text(canvas[0].tolist())
        on_draft(text if rewriting else postprocess(text, ctx, spec, check_syntax=False))

    return on_step


def request_for(job: FillJob, ctx: HoleContext, **extra) -> FillRequest:
    rewriting = job.mode in ("rewrite", "paragraph")
    engine_settings = job.settings.engine
    lengths = ()
    if job.settings.variable_length and job.mode in ("fim", "body") and not extra.get("segments"):
        base = engine_settings.canvas_length or 32
        # Variable-length holes: half, one and two canvases' worth of room, ranked together.
        lengths = (max(8, base // 2), base, base * 2)
    return FillRequest(
        prefix=ctx.prefix,
        suffix=ctx.suffix,
        n=job.n,
        chunks=job.chunks,
        max_canvases=1 if lengths else job.max_canvases,
        seed=job.seed,
        canvas_length=engine_settings.canvas_length,
        max_steps=engine_settings.max_steps,
        entropy_bound=engine_settings.entropy_bound,
        # Ghost text takes the head's greedy line unless the user asks for a beam, whatever the
        # model's default: on a full context window a beam of three tripled the typing
        # benchmark's p95 (`engine/train/README.md`, "A line from a beam"). Code actions and the
        # command line, asked for and waited on, get the model's own choice.
        lead_beam=engine_settings.lead_beam or (1 if job.mode == "inline" else None),
        seed_text=ctx.selected if rewriting else None,
        instruction=job.instruction,
        lengths=lengths,
        **extra,
    )


def _proofread(engine, job: FillJob, ctx: HoleContext, cancel, started: float) -> Fill:
    """A paragraph without an instruction is proofread (`dg_engine.proofread`): word edits the
    model judges right, the rest of the text, its line prefixes and its wrapping left as they are."""
    # Words the text around the paragraph uses are the writer's own (names, terms), not typos.
    known = frozenset(w.lower() for w in PLAIN_WORD.findall(ctx.prefix + " " + ctx.suffix))
    proofread, edits = engine.proofread(ctx.selected, before=ctx.prefix, known=known, cancel=cancel)
    return Fill(
        start=ctx.start,
        end=ctx.end,
        texts=[proofread],
        confidences=[1.0],
        latency_ms=(time.perf_counter() - started) * 1000,
        steps=1,
        kind=ctx.kind.value if isinstance(ctx.kind, HoleKind) else str(ctx.kind),
        trace={"proofread": [{"kind": e.kind, "old": ctx.selected[e.start : e.end], "new": e.text, "gain": e.gain}
                             for e in edits]},
    )


def _fill(engine, job: FillJob, ctx, spec, cancel, on_step, started: float) -> Fill:
    if job.mode == "paragraph" and job.instruction is None and getattr(engine, "proofreads", False):
        return _proofread(engine, job, ctx, cancel, started)
    rewriting = job.mode in ("rewrite", "paragraph")
    request = request_for(job, ctx)
    result = engine.fill(request, cancel=cancel, on_step=on_step)
    cleaned, repair_rounds = [], 0
    deadline = started + job.settings.inline_repair_budget_ms / 1000 if job.mode == "inline" else None
    chat = getattr(getattr(engine, "format", None), "name", "") == "chat"
    for cand in result.candidates:
        if not rewriting and spec is not None and job.settings.syntax_repair:
            # Ghost text must keep up with typing: there a fill whose salvaged start parses is
            # shown as that start, and only one that cannot be salvaged costs re-noising rounds,
            # as many as end within the inline budget.
            cand, rounds = repair(engine, request, cand, ctx, spec, cancel, job.settings.repair_rounds,
                                  salvage=job.mode == "inline", deadline=deadline,
                                  round_s=result.denoise_ms / 1000)
            repair_rounds += rounds
        raw = clean_chat_answer(cand.text, ctx.prefix) if chat and not rewriting else cand.text
        text = raw if rewriting else postprocess(raw, ctx, spec)
        cleaned.append((text, cand.mean_confidence, cand))
    order = rank([t for t, _, _ in cleaned], ctx, spec) if not rewriting else range(len(cleaned))
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
        trace={
            "repairRounds": repair_rounds,
            "leadTokens": result.timings.get("leadTokens", 0),
            "canvasLengths": sorted({c.length for c in result.candidates}),
            "chosenLength": best.length if best else 0,
            "addsSyntaxErrors": bool(texts and spec is not None and adds_syntax_errors(ctx, texts[0], spec)),
        },
    )


def error_positions(cand, ctx: HoleContext, spec, neighbourhood: int = 2) -> list[int]:
    """Canvas positions of the tokens that overlap a syntax error the fill adds, widened by a few
    tokens on each side, plus the room just after the fill so the repair may change its length."""
    combined = ctx.prefix + cand.text + ctx.suffix
    base = len(ctx.prefix)
    bad: set[int] = set()
    for span in DocumentTree(combined, spec).error_ranges():
        a, b = span.start - base, max(span.end - base, span.start - base + 1)
        for i, (ta, tb) in enumerate(cand.token_offsets):
            if ta < b and tb > a:
                bad.update(range(i - neighbourhood, i + neighbourhood + 1))
        if a >= len(cand.text):  # The error is where the fill stops: let it grow or end differently.
            bad.update(range(len(cand.token_ids) - neighbourhood, len(cand.token_ids) + neighbourhood + 1))
    return sorted(p for p in bad if 0 <= p < len(cand.canvas))


def repair(engine: Engine, request: FillRequest, cand, ctx, spec, cancel, rounds: int, salvage: bool = False,
           deadline: float | None = None, round_s: float = 0.0):
    """Syntax-guided re-noising: re-denoise the tokens around new syntax errors, the rest clamped.

    With `salvage`, a fill whose salvaged start adds no errors counts as needing no repair. With a
    `deadline` (a `time.perf_counter()` value), a round starts only when it should end before it:
    a round is expected to take as long as the last one did, the first as long as `round_s`.
    Returns the repaired candidate and the number of re-noising rounds that ran.
    """
    for done in range(rounds):
        # The deadline first: past it, the two parses below would be spent on nothing.
        if deadline is not None and time.perf_counter() + round_s > deadline:
            return cand, done
        if not adds_syntax_errors(ctx, postprocess(cand.text, ctx, spec, salvage=salvage), spec):
            return cand, done
        positions = error_positions(cand, ctx, spec)
        if not positions:
            return cand, done
        began = time.perf_counter()
        cand = engine.renoise(request, cand, positions, cancel)
        round_s = time.perf_counter() - began
    return cand, rounds


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
