"""Holes cut from the held-out standard-library modules, for measuring on code the model never saw.

The embedded model is trained on this machine's CPython standard library minus the modules named
in `dg_engine.train.corpus.HELD_OUT`. Those modules are real library code in the training style,
so they show what the model learnt rather than what it memorised. This module cuts holes in them
of the kinds an editor asks for and returns them as the same `Case`s the HumanEval sets use:

* `single_line`: half the time the rest of a line from a random column, half the time a whole line
  (from its indentation or from column 0, like the training holes);
* `multi_line`: 2 to 6 whole lines;
* `random_span`: a character span of exponentially distributed length (mean 60, at most 400).

Files are picked in proportion to their number of lines (so every line is about equally likely)
and everything is drawn from one `random.Random(seed)`, so the same seed gives the same holes.
Middles that are only whitespace are redrawn: they say nothing about the model.
"""

from __future__ import annotations

import random
from pathlib import Path

from dg_engine.train.corpus import HELD_OUT, SourceFile, read_sources

from .humaneval import Case

KINDS = ("single_line", "multi_line", "random_span")
MAX_SPAN = 400


def held_out_files(root: Path | None = None) -> list[SourceFile]:
    """The held-out modules' texts; refuses anything that is not in HELD_OUT."""
    files = read_sources(list(HELD_OUT), root)
    assert all(f.name in HELD_OUT for f in files), "a held-out case would come from a training module"
    return files


def _line_table(text: str) -> list[tuple[int, int]]:
    """(start, end before the newline) of every line."""
    table, start = [], 0
    for line in text.splitlines(keepends=True):
        table.append((start, start + len(line.rstrip("\r\n"))))
        start += len(line)
    return table


def _indent(text: str, start: int, end: int) -> int:
    line = text[start:end]
    return start + len(line) - len(line.lstrip(" \t"))


def _single_line(text: str, lines, rng: random.Random) -> tuple[int, int, str] | None:
    start, end = lines[rng.randrange(len(lines))]
    code = _indent(text, start, end)
    if end - code < 2:
        return None
    if rng.random() < 0.5:
        return rng.randrange(code, end), end, "rest_of_line"
    return (code if rng.random() < 0.5 else start), end, "whole_line"


def _multi_line(text: str, lines, rng: random.Random) -> tuple[int, int, str] | None:
    first = rng.randrange(len(lines))
    last = min(len(lines), first + rng.randint(2, 6)) - 1
    start, end = lines[first]
    if last == first or _indent(text, start, end) == end:
        return None
    begin = _indent(text, start, end) if rng.random() < 0.5 else start
    return begin, lines[last][1], "multi_line"


def _random_span(text: str, lines, rng: random.Random) -> tuple[int, int, str]:
    start = rng.randrange(len(text))
    length = min(int(rng.expovariate(1 / 60)) + 1, MAX_SPAN)
    return start, min(len(text), start + length), "random_span"


_PICKERS = {"single_line": _single_line, "multi_line": _multi_line, "random_span": _random_span}


def cut_holes(files: list[SourceFile], counts: dict[str, int], seed: int = 0) -> list[Case]:
    """`counts[kind]` holes of each kind, deterministic for the seed and the files' texts."""
    rng = random.Random(seed)
    tables = [_line_table(f.text) for f in files]
    weights = [len(t) for t in tables]
    cases: list[Case] = []
    for kind in KINDS:
        made, seen = 0, set()
        while made < counts.get(kind, 0):
            index = rng.choices(range(len(files)), weights=weights)[0]
            text, lines = files[index].text, tables[index]
            hole = _PICKERS[kind](text, lines, rng)
            if hole is None:
                continue
            start, end, sub = hole
            middle = text[start:end]
            if not middle.strip() or (index, start, end) in seen:
                continue
            seen.add((index, start, end))
            name = files[index].name
            cases.append(Case(f"heldout_{kind}", f"{name}:{start}-{end}", sub, text[:start] + text[end:], start, middle))
            made += 1
    return cases
