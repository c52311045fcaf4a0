"""Inputs the speed and memory benchmarks share: models, held-out source, and cases cut from it.

Every benchmark measures on code the embedded model never trained on: the held-out standard
library modules of `dg_engine.train.corpus.HELD_OUT`, read from this machine's stdlib. Cases are
cut deterministically (seeded), so two runs of a benchmark see the same inputs. Quick runs use the
tiny random model, saved once per user in the temp directory (the same directory the server tests
use), so that they need no trained model and run in seconds.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from pathlib import Path

from dg_engine.train.corpus import HELD_OUT, read_sources

ROOT = Path(__file__).resolve().parent.parent
# The autoregressive baseline: a fresh rebuild (engine/train/README.md) wins over the copy kept in
# the repository, which is there so that `make bench` on a fresh clone can compare against it.
AR_MODEL_DIRS = (ROOT / "runs" / "ar" / "model", ROOT / "benchmarks" / "baselines" / "ar")


def ar_model_dir() -> Path | None:
    return next((d for d in AR_MODEL_DIRS if (d / "config.json").is_file()), None)


def tiny_model_dir() -> Path:
    """The tiny random model on disk, shared by the tests and the quick benchmarks."""
    from dg_engine.tiny import cached_tiny_dir

    return cached_tiny_dir()


def resolve_model(name: str | None, quick: bool) -> str:
    """`tiny` (the default for quick runs), `embedded` (the default otherwise) or a directory."""
    name = name or ("tiny" if quick else "embedded")
    return str(tiny_model_dir()) if name == "tiny" else name


def load_model_for(name: str | None, quick: bool, threads: int):
    """(engine, model path) with torch's threads set: how the pipeline benchmarks start."""
    import torch

    from dg_engine import EngineConfig, load_engine

    torch.set_num_threads(threads)
    model = resolve_model(name, quick)
    return load_engine(EngineConfig(model=model)), model


def model_label(name: str) -> str:
    return "tiny" if name == str(tiny_model_dir()) else name


def held_out_sources(limit: int | None = None):
    """The held-out modules' texts, in the order HELD_OUT lists them."""
    names = list(HELD_OUT)[:limit] if limit else list(HELD_OUT)
    return read_sources(names)


# --- typing sessions: function bodies to delete and retype ------------------------------------------


@dataclass(frozen=True)
class Body:
    module: str
    function: str
    text: str  # the whole module
    start: int  # character offset of the body (the start of its first line, after the def line)
    end: int  # end of the body (end of its last line, newline excluded)

    @property
    def body(self) -> str:
        return self.text[self.start : self.end]


# A full context window: this much text on each side of the body (the 2,048-token default budget
# is about 6,500 characters), in a module of at least this many lines.
LONG_FILE = {"min_lines": 300, "min_before": 6000, "min_after": 3000}


def function_bodies(count: int, min_chars: int = 120, max_chars: int = 420, seed: int = 0,
                    long_files: bool = False) -> list[Body]:
    """`count` function bodies of moderate size from different held-out modules, chosen by seed.

    With `long_files`, only bodies of modules of `LONG_FILE["min_lines"]` lines or more that have
    a full context window of text before and after them."""
    rng = random.Random(seed)
    per_module: list[list[Body]] = []
    for source in held_out_sources():
        try:
            tree = ast.parse(source.text)
        except SyntaxError:
            continue
        line_starts = _line_starts(source.text)
        found = []
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.body:
                continue
            first = node.body[0].lineno
            if first <= node.lineno:  # a one-line def: nothing to delete cleanly
                continue
            start = line_starts[first - 1]
            end = line_starts[node.end_lineno] - 1 if node.end_lineno < len(line_starts) else len(source.text)
            body = source.text[start:end]
            if not (min_chars <= len(body) <= max_chars and "\t" not in body and body.isascii()):
                continue
            if long_files and (len(line_starts) < LONG_FILE["min_lines"] or start < LONG_FILE["min_before"]
                               or len(source.text) - end < LONG_FILE["min_after"]):
                continue
            found.append(Body(source.name, node.name, source.text, start, end))
        if found:
            per_module.append(found)
    rng.shuffle(per_module)
    return [rng.choice(found) for found in per_module[:count]]


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    return starts


def typing_edits(body: str) -> list[str]:
    """The insertions that retype `body`: one character each, a newline with its indentation as one
    (editors indent a new line themselves)."""
    edits: list[str] = []
    i = 0
    while i < len(body):
        if body[i] == "\n":
            j = i + 1
            while j < len(body) and body[j] == " ":
                j += 1
            edits.append(body[i:j])
            i = j
        elif i == 0 and body[0] == " ":
            j = len(body) - len(body.lstrip(" "))
            edits.append(body[:j])
            i = j
        else:
            edits.append(body[i])
            i += 1
    return edits


# --- decode cases: middles of a given number of tokens ----------------------------------------------


@dataclass(frozen=True)
class Span:
    module: str
    prefix: str
    middle: str
    suffix: str
    tokens: int


def token_spans(tokenizer, tokens: int, count: int, seed: int = 0, prefix_chars: int = 2400, suffix_chars: int = 800) -> list[Span]:
    """`count` middles of exactly `tokens` tokens (as the tokenizer cuts the file), each starting at
    the first non-blank character of a code line, with the prefix and suffix trimmed around it."""
    rng = random.Random(seed * 1000 + tokens)
    sources = held_out_sources()
    rng.shuffle(sources)
    spans: list[Span] = []
    for source in sources * 4:  # revisit modules when there are more cases than modules
        if len(spans) == count:
            break
        text = source.text
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = encoded["offset_mapping"]
        if len(offsets) < tokens + 64:
            continue
        lines = [i for i, (a, _) in enumerate(offsets[: len(offsets) - tokens]) if a > 0 and text[a - 1] == "\n" and text[a].strip()]
        if not lines:
            continue
        first = rng.choice(lines)
        start, end = offsets[first][0], offsets[first + tokens - 1][1]
        middle = text[start:end]
        if not middle.strip():
            continue
        prefix = text[max(0, start - prefix_chars) : start]
        suffix = text[end : end + suffix_chars]
        spans.append(Span(source.name, prefix, middle, suffix, tokens))
    return spans


def long_text(tokenizer, tokens: int) -> str:
    """Held-out code of at least `tokens` tokens (whole modules joined, cut at a line end)."""
    parts, total = [], 0
    for source in held_out_sources():
        parts.append(source.text)
        total += len(tokenizer(source.text, add_special_tokens=False)["input_ids"])
        if total >= tokens * 1.1:
            break
    return "\n".join(parts)


def use_threads(requested: int, quick: bool) -> int:
    """Set torch's thread count for a benchmark run; returns the previous count to restore.

    Quick runs prove the machinery works; one thread keeps them fast on a loaded machine.
    """
    import torch

    previous = torch.get_num_threads()
    threads = requested or (1 if quick else 0)
    if threads:
        torch.set_num_threads(threads)
    return previous
