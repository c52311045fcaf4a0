"""Edit traces as training examples for next-edit suggestions.

A trace (`dg_engine.train.traces`) is three versions of one file: `before` (consistent code),
`current` (the user's first edit applied) and `after` (the edits it implies made too). The example
shows the model `current` around a window with the edit as a diff hunk (`dg_engine.nextedit`, the
server's own prompt) and trains it to write the window as in `after`.

The window is chosen as the server chooses it: around the edit, or around the first line the edit
implies a change in. Its current tokens, aligned with the target's, ride along as `stale_ids` so
that the noise can put stale tokens where they stand at inference (a seeded canvas).
"""

from __future__ import annotations

import difflib
import random

from ..nextedit import WINDOW_AFTER, Hunk, edit_chunks, line_hunks, split_window, window_lines
from ..prompt import FimFormat, encode
from .augment import name_pool
from .examples import Example, ExampleSource, clip_to_fit
from .traces import KINDS, Trace, make_trace

# Characters of context kept on each side of the window (cut at line boundaries).
PREFIX_CHARS = (600, 3000)
SUFFIX_CHARS = (300, 1500)


def choose_window(trace: Trace, rng: random.Random) -> range | None:
    """The window a server would rewrite: at the edit, or at the first change the edit implies."""
    history, targets = line_hunks(trace.before, trace.current), line_hunks(trace.current, trace.after)
    if not history or not targets:
        return None
    edit_line, first = history[-1].line_after, targets[0].line
    near = edit_line <= first <= edit_line + WINDOW_AFTER
    anchor = edit_line if trace.kind != "import" and near and rng.random() < 0.7 else first
    return window_lines(len(trace.current.splitlines()), anchor)


def _line_by_line(hunks: list[Hunk]) -> list[Hunk]:
    """Hunks that replace n lines by n lines, split into single lines (a window may end inside)."""
    out = []
    for h in hunks:
        if len(h.before) == len(h.after) > 1:
            out += [Hunk(h.line + k, (b,), (a,), h.line_after + k) for k, (b, a) in enumerate(zip(h.before, h.after))]
        else:
            out.append(h)
    return out


def target_window(trace: Trace, lines: range) -> tuple[range, str] | None:
    """The window's lines (cut before a change that crosses its end) and their text in `after`."""
    current, after = trace.current.splitlines(keepends=True), trace.after.splitlines(keepends=True)
    stop, parts, at = lines.stop, [], lines.start
    for h in _line_by_line(line_hunks(trace.current, trace.after)):
        end = h.line + len(h.before)
        if end <= lines.start if h.before else h.line < lines.start:
            continue  # wholly before the window
        if h.line < lines.start:
            return None  # crosses the window's start
        if h.line >= stop or end > stop:
            stop = min(stop, h.line)  # crosses (or lies past) the window's end
            break
        parts += current[at : h.line] + after[h.line_after : h.line_after + len(h.after)]
        at = end
    if stop <= lines.start:
        return None
    return range(lines.start, stop), "".join(parts + current[at:stop])


def _clip(text: str, chars: int, keep_end: bool) -> str:
    """At most `chars` characters of `text` from one end, cut at a line boundary."""
    if len(text) <= chars:
        return text
    if keep_end:
        cut = text[-chars:]
        return cut[cut.find("\n") + 1 :] if "\n" in cut else cut
    cut = text[:chars]
    return cut[: cut.rfind("\n") + 1] if "\n" in cut else cut


def trace_example(trace: Trace, fmt: FimFormat, rng: random.Random, max_tokens: int,
                  multiple: int = 1, max_prompt_tokens: int | None = None) -> Example | None:
    """The trace as a FIM example: edits as chunks, the window's target as the middle.

    The canvas is the target, `<fim_end>` and padding up to a multiple of `multiple` (a block).
    The text around the window is cut to `max_prompt_tokens` (a tenth of the rows of the long
    run were longer than the 1,024 tokens a row holds); None if the edits alone do not fit."""
    lines = choose_window(trace, rng)
    if lines is None:
        return None
    found = target_window(trace, lines)
    if found is None:
        return None
    window, middle = found
    prefix, stale, suffix = split_window(trace.current, window)
    ids, stale_ids = encode(fmt.tokenizer, middle), encode(fmt.tokenizer, stale)
    if len(ids) + 1 > max_tokens or len(stale_ids) + 1 > max_tokens:
        return None
    prefix = _clip(prefix, rng.randint(*PREFIX_CHARS), keep_end=True)
    suffix = _clip(suffix, rng.randint(*SUFFIX_CHARS), keep_end=False)
    chunks = list(edit_chunks(line_hunks(trace.before, trace.current)))
    prompt = fmt.infill_ids(prefix, suffix, chunks)
    if max_prompt_tokens is not None:
        prefix, suffix, prompt = clip_to_fit(prefix, suffix, prompt, max_prompt_tokens,
                                             lambda p, s: fmt.infill_ids(p, s, chunks))
        if len(prompt) > max_prompt_tokens:
            return None
    canvas = fmt.canvas_ids(middle, -(-(len(ids) + 1) // multiple) * multiple)
    aligned = align_stale(canvas, stale_ids + [fmt.specials.end_of_middle])
    return Example(f"edit_{trace.kind}", prefix, middle, suffix, "", chunks, prompt, canvas, aligned)


def align_stale(target: list[int], stale: list[int]) -> list[int]:
    """For each target token, the stale token that stands in its place (-1 where none does)."""
    out = [-1] * len(target)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, target, stale, autojunk=False).get_opcodes():
        if tag in ("equal", "replace"):
            for k in range(min(i2 - i1, j2 - j1)):
                out[i1 + k] = stale[j1 + k]
    return out


class EditSource:
    """Draws edit-trace examples from the files of an `ExampleSource`."""

    def __init__(self, texts: list[str], fmt: FimFormat, pool: list[str]):
        self.texts, self.fmt, self.pool = texts, fmt, pool

    @classmethod
    def from_examples(cls, source: ExampleSource) -> "EditSource":
        """The FIM source's files, and its name pool (built here when renaming is off there)."""
        pool = source.names or name_pool(s.text for s in source.sources[: source.config.name_pool_files])
        return cls([s.text for s in source.sources], source.fmt, pool)

    def sample(self, rng: random.Random, max_tokens: int, multiple: int = 1, tries: int = 12,
               max_prompt_tokens: int | None = None) -> Example | None:
        """An example of a random kind, or None when `tries` files in a row had none."""
        for _ in range(tries):
            kind = rng.choice(KINDS)
            trace = make_trace(rng.choice(self.texts), kind, rng, self.pool)
            example = trace_example(trace, self.fmt, rng, max_tokens, multiple, max_prompt_tokens) if trace else None
            if example is not None:
                return example
        return None
