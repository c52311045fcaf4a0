"""Joint multi-hole fill: every hole of a region in one canvas, so the holes agree.

Filling holes one at a time lets each see the others only as placeholders. Here the canvas spans
from the first hole to the last: each hole is a stretch of free positions and the known text
between holes is clamped, so one denoising pass fills all of them while every hole attends to
every other (a name introduced in one hole can be used in the next).
"""

from __future__ import annotations

import time

from dg_engine import Engine

from .fill import Fill, FillJob, estimate_tokens, request_for
from .syntax import Budget, extract_context, language_for, postprocess

# Free canvas positions per hole; the model may leave some as padding.
HOLE_TOKENS = 16


def run_joint(engine: Engine, job: FillJob, holes: list[tuple[int, int]], cancel) -> tuple[list[tuple[int, int, str]], Fill]:
    """Edits (start, end, text) for every hole, from one joint denoising pass."""
    started = time.perf_counter()
    text = job.snapshot.text
    holes = sorted(holes)
    spec = language_for(job.snapshot.language_id, job.snapshot.uri)
    budget = Budget(prefix_tokens=job.settings.context_budget * 3 // 4, suffix_tokens=job.settings.context_budget // 4)
    tree = job.snapshot.tree  # The snapshot's tree of this text: the holes' contexts need no parse.
    region = extract_context(text, holes[0][0], holes[-1][1], spec, budget, estimate_tokens, tree=tree)
    parts: list[str | int] = []
    for i, (start, end) in enumerate(holes):
        parts.append(HOLE_TOKENS)
        if i + 1 < len(holes):
            parts.append(text[end : holes[i + 1][0]])
    request = request_for(job, region, segments=tuple(parts))
    result = engine.fill(request, cancel=cancel)
    best = result.candidates[0]
    edits = []
    for (start, end), fill_text in zip(holes, best.holes):
        ctx = extract_context(text, start, end, spec, budget, estimate_tokens, tree=tree)
        edits.append((start, end, postprocess(fill_text, ctx, spec)))
    fill = Fill(
        start=holes[0][0],
        end=holes[-1][1],
        texts=[best.text],
        confidences=[best.mean_confidence],
        latency_ms=(time.perf_counter() - started) * 1000,
        steps=best.steps,
        kind="holes",
    )
    return edits, fill
