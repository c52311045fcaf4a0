"""Minimal text edits: turn "replace this range by that text" into only the changed pieces.

A rewrite that keeps most of a paragraph should show in the editor's diff and undo as the few
words it changed, not as one replacement of everything. Edits are computed on word-and-space
tokens with difflib and returned as (start, end, new_text) offsets into the original text.
"""

from __future__ import annotations

import difflib
import re

TOKEN = re.compile(r"\s+|\w+|[^\w\s]")


def _tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _starts(tokens: list[str]) -> list[int]:
    starts = [0]
    for tok in tokens:
        starts.append(starts[-1] + len(tok))
    return starts


def edit_spans(old: str, new: str) -> list[tuple[int, int, int, int]]:
    """The changed pieces as (old start, old end, new start, new end), in document order."""
    if old == new:
        return []
    a, b = _tokens(old), _tokens(new)
    sa, sb = _starts(a), _starts(b)
    return [(sa[i1], sa[i2], sb[j1], sb[j2])
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
            if tag != "equal"]


def minimal_edits(old: str, new: str, base: int = 0) -> list[tuple[int, int, str]]:
    """Edits that turn `old` (which starts at offset `base`) into `new`, in document order."""
    return [(base + a0, base + a1, new[b0:b1]) for a0, a1, b0, b1 in edit_spans(old, new)]


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Apply non-overlapping edits given in document order (used by tests and the demo)."""
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text
