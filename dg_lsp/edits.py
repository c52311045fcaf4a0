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


def minimal_edits(old: str, new: str, base: int = 0) -> list[tuple[int, int, str]]:
    """Edits that turn `old` (which starts at offset `base`) into `new`, in document order."""
    if old == new:
        return []
    a, b = _tokens(old), _tokens(new)
    starts_a = [0]
    for tok in a:
        starts_a.append(starts_a[-1] + len(tok))
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        edits.append((base + starts_a[i1], base + starts_a[i2], "".join(b[j1:j2])))
    return edits


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Apply non-overlapping edits given in document order (used by tests and the demo)."""
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text
