"""Training examples shaped like the holes an editor asks the engine to fill.

Each example picks a hole in a corpus file (rest of a line, a whole line, a few lines, a block
body, nothing at all, a random span, or a plain continuation), cuts the prefix and suffix at line
boundaries to a sampled token budget, and builds the encoder prompt and the clean canvas through
`FimFormat`, the very functions the engine uses at inference, so the two can never disagree.
Everything is drawn from a `random.Random` seeded per step, which makes batches reproducible and
lets a resumed run see exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field
from itertools import accumulate

from ..prompt import FimFormat, encode
from .augment import name_pool, rename
from .corpus import SourceFile

KINDS = ("rest_of_line", "whole_line", "multi_line", "block_body", "empty", "random_span", "continuation")


@dataclass(frozen=True)
class ExampleConfig:
    """How examples are drawn; the defaults are the ones the real run uses."""

    max_prompt_tokens: int = 768
    min_prompt_tokens: int = 48
    canvas_lengths: tuple[int, ...] = (16, 32, 48, 64)
    kind_weights: tuple[float, ...] = (0.2, 0.15, 0.15, 0.1, 0.05, 0.15, 0.2)
    middle_so_far_prob: float = 0.15
    chunk_prob: float = 0.1
    max_chunk_lines: int = 16
    # The share of examples whose identifiers are renamed consistently (see augment.py).
    rename_prob: float = 0.0
    # Renamed identifiers are drawn from the names of the first files (a pool from 100k files
    # would cost a minute at start-up for no more variety).
    name_pool_files: int = 5000


@dataclass
class Example:
    """One hole: the texts it was cut into and the token ids the model sees."""

    kind: str
    prefix: str
    middle: str
    suffix: str
    middle_so_far: str
    chunks: list[str]
    prompt_ids: list[int]
    canvas_ids: list[int]
    # Edit traces only: the current token standing in each canvas position's place (-1: none).
    stale_ids: list[int] | None = None


@dataclass
class _File:
    """A corpus file with its lines and per-line token counts, precomputed once."""

    text: str
    starts: list[int]
    lines: list[str]
    cumulative_tokens: list[int] = field(default_factory=list)


def _index(file: SourceFile, tokenizer) -> _File:
    lines = file.text.splitlines(keepends=True)
    starts = [0, *accumulate(len(line) for line in lines)][:-1]
    counts = [len(ids) for ids in tokenizer(lines, add_special_tokens=False)["input_ids"]] if lines else []
    return _File(file.text, starts, lines, [0, *accumulate(counts)])


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _content_end(f: _File, i: int) -> int:
    """Offset of the end of line i, before its newline."""
    return f.starts[i] + len(f.lines[i].rstrip("\r\n"))


class ExampleSource:
    """Draws examples and batches from a list of corpus files."""

    def __init__(self, files: list[SourceFile], fmt: FimFormat, config: ExampleConfig = ExampleConfig()):
        self.fmt = fmt
        self.config = config
        # Files are indexed (lines, token counts) on first use: a corpus of 100k files would take
        # minutes to index up front, and a run of a few thousand steps touches a fraction of them.
        self.sources = [s for s in files if len(s.text.splitlines()) >= 3]
        if not self.sources:
            raise ValueError("no usable corpus files")
        self._indexed: dict[int, _File] = {}
        pool_from = self.sources[: config.name_pool_files]
        self.names = name_pool(s.text for s in pool_from) if config.rename_prob > 0 else []

    def _pick_file(self, rng: random.Random) -> _File:
        i = rng.randrange(len(self.sources))
        if i not in self._indexed:
            self._indexed[i] = _index(self.sources[i], self.fmt.tokenizer)
        return self._indexed[i]

    # Hole pickers: each returns the (start, end) character offsets of the middle, or None.

    def _rest_of_line(self, f: _File, rng: random.Random) -> tuple[int, int] | None:
        i = rng.randrange(len(f.lines))
        content = f.lines[i].rstrip("\r\n")
        if len(content.strip()) < 2:
            return None
        col = rng.randrange(_indent(content), len(content))
        return f.starts[i] + col, _content_end(f, i)

    def _lines(self, f: _File, rng: random.Random, count: int) -> tuple[int, int] | None:
        i = rng.randrange(len(f.lines))
        j = min(len(f.lines), i + count) - 1
        if not f.lines[i].strip():
            return None
        start = f.starts[i] + (_indent(f.lines[i]) if rng.random() < 0.5 else 0)
        return start, _content_end(f, j)

    def _block_body(self, f: _File, rng: random.Random) -> tuple[int, int] | None:
        headers = [i for i, line in enumerate(f.lines[:-1]) if line.rstrip().endswith(":")]
        if not headers:
            return None
        i = rng.choice(headers)
        base = _indent(f.lines[i])
        j = i + 1
        last = None
        while j < len(f.lines) and (not f.lines[j].strip() or _indent(f.lines[j]) > base):
            if f.lines[j].strip():
                last = j
            j += 1
        if last is None:
            return None
        first = f.lines[i + 1]
        start = f.starts[i + 1] + (_indent(first) if rng.random() < 0.5 and first.strip() else 0)
        return start, _content_end(f, last)

    def _empty(self, f: _File, rng: random.Random) -> tuple[int, int]:
        i = rng.randrange(len(f.lines))
        content = f.lines[i].rstrip("\r\n")
        at = f.starts[i] + rng.randint(0, len(content))
        return at, at

    def _random_span(self, f: _File, rng: random.Random) -> tuple[int, int]:
        start = rng.randrange(len(f.text))
        length = min(int(rng.expovariate(1 / 60)) + 1, 400)
        return start, min(len(f.text), start + length)

    def _continuation(self, f: _File, rng: random.Random) -> tuple[int, int]:
        i = rng.randrange(1, len(f.lines))
        j = min(len(f.lines), i + rng.randint(1, 8)) - 1
        return f.starts[i], f.starts[j] + len(f.lines[j])

    def _pick_hole(self, f: _File, kind: str, rng: random.Random) -> tuple[int, int] | None:
        if kind == "rest_of_line":
            return self._rest_of_line(f, rng)
        if kind == "whole_line":
            return self._lines(f, rng, 1)
        if kind == "multi_line":
            return self._lines(f, rng, rng.randint(2, 6))
        if kind == "block_body":
            return self._block_body(f, rng)
        if kind == "empty":
            return self._empty(f, rng)
        if kind == "random_span":
            return self._random_span(f, rng)
        return self._continuation(f, rng)

    # Windowing: prefix and suffix are cut at line boundaries to fit a token budget.

    def _line_of(self, f: _File, offset: int) -> int:
        return max(0, bisect.bisect_right(f.starts, offset) - 1)

    def _window(self, f: _File, a: int, b: int, prefix_budget: int, suffix_budget: int) -> tuple[str, str]:
        la = self._line_of(f, a)
        # Keep whole lines before the hole's line while they fit; the hole's own line is always kept.
        first = la
        while first > 0 and f.cumulative_tokens[la] - f.cumulative_tokens[first - 1] <= prefix_budget:
            first -= 1
        lb = self._line_of(f, b) if b < len(f.text) else len(f.lines) - 1
        last = lb
        while last + 1 < len(f.lines) and f.cumulative_tokens[last + 2] - f.cumulative_tokens[lb + 1] <= suffix_budget:
            last += 1
        end = f.starts[last] + len(f.lines[last])
        return f.text[f.starts[first] : a], f.text[b:end]

    def _chunk(self, rng: random.Random) -> str:
        f = self._pick_file(rng)
        i = rng.randrange(len(f.lines))
        return "".join(f.lines[i : i + rng.randint(4, self.config.max_chunk_lines)])

    def sample(self, rng: random.Random, canvas_length: int) -> Example:
        """One example of a randomly chosen kind with the given canvas length."""
        cfg = self.config
        while True:
            kind = rng.choices(KINDS, weights=cfg.kind_weights)[0]
            f = self._pick_file(rng)
            hole = self._pick_hole(f, kind, rng)
            if hole is not None:
                break
        a, b = hole
        # Log-uniform prompt budgets: short contexts are common in an editor, long ones matter too.
        budget = int(cfg.min_prompt_tokens * (cfg.max_prompt_tokens / cfg.min_prompt_tokens) ** rng.random())
        chunks = [self._chunk(rng)] if rng.random() < cfg.chunk_prob else []
        budget -= sum(len(encode(self.fmt.tokenizer, c)) + 1 for c in chunks)
        share = 1.0 if kind == "continuation" else rng.uniform(0.3, 0.85)
        prefix, suffix = self._window(f, a, b, int(budget * share), int(budget * (1 - share)))
        if kind == "continuation":
            suffix = ""
        middle = f.text[a:b]
        # Drawn only when renaming is on, so runs without it see exactly the batches they always did.
        if cfg.rename_prob > 0 and rng.random() < cfg.rename_prob:
            prefix, middle, suffix = rename([prefix, middle, suffix], self.names, rng)
        so_far = self._split_middle(middle, rng)
        rest = middle[len(so_far) :]
        prompt = self.fmt.infill_ids(prefix, suffix, chunks, so_far)
        if len(prompt) > cfg.max_prompt_tokens:
            prefix, suffix, chunks, so_far, prompt = self._fit(prefix, suffix, chunks, so_far, prompt)
            middle = so_far + rest
        canvas = self.fmt.canvas_ids(rest, canvas_length)
        return Example(kind, prefix, middle, suffix, so_far, chunks, prompt, canvas)

    def _fit(self, prefix: str, suffix: str, chunks: list[str], so_far: str, prompt: list[int]):
        """The prompt's parts cut to `max_prompt_tokens`, for a hole whose own line is longer than
        the budget (the line windowing always keeps it): the text around the hole by characters,
        nearest the hole kept, then the cross-file chunk, then the start of the middle so far.
        Such a line (a change log joined into one paragraph) once made a 9,485-token prompt, a
        batch of 9,517-token rows and a training process of 20 GB."""
        limit, infill = self.config.max_prompt_tokens, self.fmt.infill_ids
        prefix, suffix, prompt = clip_to_fit(prefix, suffix, prompt, limit, lambda p, s: infill(p, s, chunks, so_far))
        if len(prompt) > limit and chunks:
            chunks = []
            prompt = infill(prefix, suffix, chunks, so_far)
        while len(prompt) > limit and so_far:
            # The typed head of the middle ends at the cursor: keep its end, and no prefix (which
            # would no longer join it).
            prefix, so_far = "", clip_around_hole(so_far, "", len(prompt), limit)[0]
            prompt = infill(prefix, suffix, chunks, so_far)
        return prefix, suffix, chunks, so_far, prompt

    def _split_middle(self, middle: str, rng: random.Random) -> str:
        """Sometimes give the start of the middle as already written (a middle longer than a canvas)."""
        if rng.random() >= self.config.middle_so_far_prob:
            return ""
        ids = encode(self.fmt.tokenizer, middle)
        if len(ids) < 4:
            return ""
        head = self.fmt.tokenizer.decode(ids[: rng.randint(1, len(ids) - 2)])
        return head if middle.startswith(head) else ""

    def batch_examples(self, seed: int, step: int, batch_size: int) -> list[Example]:
        """The examples of one step: a pure function of (seed, step), so resuming is exact."""
        rng = random.Random(seed * 1_000_003 + step)
        canvas_length = rng.choice(self.config.canvas_lengths)
        return [self.sample(rng, canvas_length) for _ in range(batch_size)]


def clip_around_hole(prefix: str, suffix: str, tokens: int, limit: int) -> tuple[str, str]:
    """`prefix` and `suffix` cut by characters, nearest the hole kept, to about `limit` of `tokens`:
    both shrink by the same share, a tenth more than the overshoot, so a few rounds reach it."""
    keep = max(0.0, limit / tokens * 0.9)
    return prefix[len(prefix) - int(len(prefix) * keep):], suffix[: int(len(suffix) * keep)]


def clip_to_fit(prefix: str, suffix: str, prompt: list[int], limit: int, build) -> tuple[str, str, list[int]]:
    """`prefix` and `suffix` cut around the hole until `build(prefix, suffix)` (the prompt) is at most
    `limit` tokens or nothing is left of them; `prompt` is what they build now."""
    while len(prompt) > limit and (prefix or suffix):
        prefix, suffix = clip_around_hole(prefix, suffix, len(prompt), limit)
        prompt = build(prefix, suffix)
    return prefix, suffix, prompt
