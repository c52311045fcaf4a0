"""Next-edit suggestions: after an edit, the edits it implies, proposed and judged by the model.

The pipeline, run on the compute worker from a `NextEditJob` captured on the loop:

1. proposals: the edits the latest edit's shape implies (`implied.py`: a rename's other uses, a
   changed line's siblings, the calls of a changed `def`, an import added or left unused);
2. windows: the lines around the latest edit, then around the first proposal that window misses
   (without proposals, where `anchors` says the edit points);
3. for each window holding proposals, `Engine.fill` seeded with the window as the proposals leave
   it, the recent edits as diff-hunk chunks (`dg_engine.nextedit`, the format the model was
   trained on) and the text around; a proposal the model's two denoising steps leave as it was is
   kept, with the lowest confidence of its tokens;
4. the gates: edits below the confidence bar, edits inside what the user just typed, edits that
   share nothing with the latest edit, and any suggestion that would redo an undone change are
   dropped.

With `nextEdit.onlyImplied` off, the model's own changes to a window are shown as well, and a
window without proposals is rewritten freely. The embedded model's free rewrites were never right
on the held-out traces (0 of 24 shown), while the proposals were right for 84 of 86; a wrong
suggestion costs the user attention, so by default only proposals are shown.
"""

from __future__ import annotations

import builtins
import keyword
import re
import time
from dataclasses import dataclass, field

from dg_engine import FillRequest
from dg_engine.nextedit import Hunk, edit_chunks, line_hunks, split_window, window_lines

from .documents import Snapshot
from .edit_history import Pair, pair
from .edits import apply_edits, edit_spans
from .implied import implied_edits
from .fill import CHARS_PER_TOKEN
from .settings import Settings

# A window of at most this many tokens (estimated): the size the model's traces were cut to.
WINDOW_TOKENS = 160
MAX_WINDOWS = 2
# The text around a window that the prompt holds (at most the user's context budget), and the
# denoising steps that judge a proposal. On 80 held-out traces of another seed than the benchmark's,
# the embedded model's suggestions were right in 61 of 63 shown with 384 tokens and two steps, 57 of
# 59 with 512 tokens (two steps or four), 45 of 48 with 1,536 tokens and twelve steps; and the
# prefill, which no ghost-text cache can share (the prompt opens with the edits and the suffix),
# costs a quarter of what 1,536 tokens cost.
CONTEXT_TOKENS = 384
JUDGE_STEPS = 2
NAME = re.compile(r"[A-Za-z_]\w*")
# The words of an edit (names and literals) and, for an edit of operators alone, its symbols.
WORD = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|'[^'\n]*'|\"[^\"\n]*\"")
SYMBOL = re.compile(r"[^\s\w'\"]")
IMPORT = re.compile(r"^\s*(import|from)\s+\S")
# Names no import provides: a use of one never points at the imports.
LANGUAGE_NAMES = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {"self", "cls"}


@dataclass(frozen=True)
class NextEditJob:
    snapshot: Snapshot
    offset: int
    hunks: tuple[Hunk, ...]
    undone: frozenset[Pair]
    settings: Settings


@dataclass
class Suggestion:
    uri: str
    version: int
    edits: list[tuple[int, int, str, float]]  # (start, end, new text, confidence), document order
    confidence: float
    latency_ms: float = 0.0
    window: tuple[int, int] = (0, 0)
    trace: dict = field(default_factory=dict)


def _names(lines) -> set[str]:
    return {m.group(0) for line in lines for m in NAME.finditer(line)}


def _first_line_with(lines: list[str], names: set[str], skip: range, pattern: str = r"\b{}\b") -> int | None:
    if not names:
        return None
    found = re.compile("|".join(pattern.format(re.escape(n)) for n in sorted(names)))
    hits = [i for i, line in enumerate(lines) if i not in skip and found.search(line)]
    after = [i for i in hits if i >= skip.stop]
    return (after or hits or [None])[0]


def anchors(text: str, hunks: tuple[Hunk, ...], cursor_line: int) -> list[int]:
    """Lines to centre windows on: the latest edit first, then where it implies a change."""
    lines = text.splitlines()
    if not hunks:
        return [cursor_line]
    h = hunks[-1]
    out = [h.line_after]
    first = window_lines(len(lines), h.line_after)
    removed = _names(h.before) - _names(h.after)
    added = _names(h.after) - _names(h.before)
    changed_defs = {m.group(1) for line in h.after for m in re.finditer(r"\bdef\s+([A-Za-z_]\w*)\s*\(", line)}
    elsewhere = _first_line_with(lines, removed, first) if removed else None
    calls = _first_line_with(lines, changed_defs, first, r"\b{}\s*\(") if changed_defs and h.before else None
    imports = [i for i, line in enumerate(lines) if IMPORT.match(line)]
    import_line = None
    if imports:
        def where(name: str) -> set[int]:
            return {i for i, line in enumerate(lines) if re.search(rf"\b{re.escape(name)}\b", line)}

        undefined = {n for n in added - LANGUAGE_NAMES if not where(n) - set(h.new_lines)}
        unused = {n for n in removed if where(n) and where(n) <= set(imports)}
        if undefined or unused:
            import_line = imports[0]
    for line in (calls, elsewhere, import_line):
        if line is not None and line not in out:
            out.append(line)
    return out


def implied_by(hunk: Hunk | None):
    """A test of whether an edit (old text, new text, its line) can follow from `hunk`: it touches
    a word the hunk added or removed (a symbol, when the hunk changed only symbols), or it deletes
    within a call of a `def` the hunk changed (an argument dropped with its parameter). Without a
    recent edit nothing is implied, so everything passes."""
    if hunk is None:
        return lambda old, new, line: True
    before, after = "\n".join(hunk.before), "\n".join(hunk.after)
    pattern = WORD
    changed = set(WORD.findall(before)) ^ set(WORD.findall(after))
    if not changed:
        pattern = SYMBOL
        changed = set(SYMBOL.findall(before)) ^ set(SYMBOL.findall(after))
    defs = {m.group(1) for m in re.finditer(r"\bdef\s+([A-Za-z_]\w*)\s*\(", after)} if hunk.before else set()
    calls = re.compile("|".join(rf"\b{re.escape(d)}\s*\(" for d in sorted(defs))) if defs else None

    def test(old: str, new: str, line: str) -> bool:
        if changed & set(pattern.findall(old + "\n" + new)):
            return True
        return bool(calls and not new.strip() and calls.search(line))
    return test


def fit(lines: list[str], window: range, tokens: int = WINDOW_TOKENS) -> range:
    """The window shortened from its end until its estimated tokens fit."""
    stop = window.stop
    while stop > window.start + 1 and sum(len(lines[i]) for i in range(window.start, stop)) / CHARS_PER_TOKEN > tokens:
        stop -= 1
    return range(window.start, stop)


def _edit_confidence(cand, b0: int, b1: int) -> float:
    """The lowest confidence of the tokens written in [b0, b1) (the neighbours of a deletion)."""
    touched = [p for (a, b), p in zip(cand.token_offsets, cand.confidences) if a < max(b1, b0 + 1) and b > b0 - (b0 == b1)]
    return min(touched) if touched else 0.0


def _judged(proposal: list[tuple[int, int, str]], seeded: str, cand, own: bool) -> list[tuple[int, int, str, float]]:
    """The proposed edits (window offsets, in order) that the model's rewrite of the seeded window
    left as proposed, each with the lowest confidence of the tokens in and around it; with `own`,
    also the model's other changes, mapped back to the window's current text."""
    changes = edit_spans(seeded, cand.text)  # what the model changed in the seeded text
    regions, shift = [], 0
    for a, b, new in proposal:
        regions.append((a + shift, a + shift + len(new), a, b, new))  # where it sits in `seeded`
        shift += len(new) - (b - a)

    def touches(c0: int, c1: int, lo: int, hi: int) -> bool:
        return c0 < max(hi, lo + 1) and c1 > lo - (lo == hi)

    def moved(x: int) -> int:  # offset x of `seeded` in the model's text
        return x + sum((d1 - d0) - (c1 - c0) for c0, c1, d0, d1 in changes if c1 <= x)

    out = []
    for lo, hi, a, b, new in regions:
        if not any(touches(c0, c1, lo, hi) for c0, c1, _, _ in changes):  # else the model wrote otherwise
            out.append((a, b, new, _edit_confidence(cand, moved(lo), moved(hi))))
    for c0, c1, d0, d1 in changes if own else ():
        if not any(touches(c0, c1, lo, hi) for lo, hi, *_ in regions):
            back = sum(len(new) - (b - a) for lo, hi, a, b, new in regions if hi <= c0)
            out.append((c0 - back, c1 - back, cand.text[d0:d1], _edit_confidence(cand, d0, d1)))
    return sorted(out)


def suggest(engine, job: NextEditJob, cancel) -> Suggestion | None:
    """The best suggestion over the job's windows, or None when nothing passes the gates.

    Where the latest edit implies edits of a known shape (`implied.implied_edits`), the window is
    seeded with them applied and the model judges them: an edit it keeps, at or above the
    confidence bar, is shown. The model's own changes to the window are shown only when the user
    turned `nextEdit.onlyImplied` off: the embedded model's free rewrites were never right on the
    held-out traces.
    """
    started = time.perf_counter()
    text = job.snapshot.text
    lines = text.splitlines(keepends=True)
    cursor_line = text.count("\n", 0, job.offset)
    latest = job.hunks[-1].new_lines if job.hunks else range(0)
    chunks = edit_chunks(list(job.hunks))
    budget = int(min(job.settings.context_budget, CONTEXT_TOKENS) * CHARS_PER_TOKEN)
    tried = []
    only_implied = job.settings.next_edit_only_implied
    related = implied_by(job.hunks[-1] if job.hunks and only_implied else None)
    implied = implied_edits(text, job.hunks[-1] if job.hunks else None)
    for anchor in _anchors(text, job.hunks, cursor_line, implied)[:MAX_WINDOWS]:
        window = fit(lines, window_lines(len(lines), anchor))
        prefix, seed, suffix = split_window(text, window)
        start = len(prefix)
        proposal = [(a - start, b - start, new) for a, b, new in implied if start <= a and b <= start + len(seed)]
        if not proposal and only_implied:
            continue
        seeded = apply_edits(seed, proposal)
        request = FillRequest(prefix=prefix[-budget * 3 // 4:], suffix=suffix[: budget // 4], chunks=chunks,
                              seed_text=seeded, max_steps=JUDGE_STEPS if proposal else job.settings.engine.max_steps,
                              reuse_cache=True)
        cand = engine.fill(request, cancel=cancel).candidates[0]
        tried.append(anchor)
        found = _judged(proposal, seeded, cand, own=not only_implied)
        edits = []
        for a0, a1, new, conf in found:
            line = text.count("\n", 0, start + a0)
            if line in latest and text.count("\n", 0, start + a1) in latest:
                continue  # never rewrite what the user has just typed
            if not related(seed[a0:a1], new, lines[line] if line < len(lines) else ""):
                continue  # nothing the latest edit implies
            if conf >= job.settings.next_edit_min_confidence:
                edits.append((start + a0, start + a1, new, conf))
        shown = apply_edits(seed, [(a - start, b - start, new) for a, b, new, _ in edits])
        if any(pair(h.before, h.after) in job.undone for h in line_hunks(seed, shown)):
            continue  # it would redo what the user undid
        if edits:
            return Suggestion(job.snapshot.uri, job.snapshot.version, edits, min(e[3] for e in edits),
                              (time.perf_counter() - started) * 1000, (start, start + len(seed)),
                              {"windows": tried, "implied": len(implied)})
    return None


def _anchors(text: str, hunks: tuple[Hunk, ...], cursor_line: int, implied) -> list[int]:
    """Window centres: the latest edit's, then the first implied edit the first window misses."""
    found = anchors(text, hunks, cursor_line)
    if not implied:
        return found
    lines = text.splitlines(keepends=True)
    first = fit(lines, window_lines(len(lines), found[0]))
    lines_of = (text.count("\n", 0, a) for a, _, _ in implied)  # stops at the first outside it
    outside = next((line for line in lines_of if line not in first), None)
    return [found[0]] + ([outside] if outside is not None else [])
