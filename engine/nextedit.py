"""Next-edit prompts: recent edits as diff hunks, and the window the model rewrites after them.

A next-edit suggestion is a seeded rewrite: the canvas starts as the current text of a window
around the user's last edit, the prompt holds the text around the window and the recent edits,
and the model re-noises whatever no longer fits those edits (the other uses of a renamed name,
the call sites of a changed signature, the siblings of a changed line). The training traces
(`dg_engine.train.edits`) and the server build their prompts with these functions, so the two
can never disagree on how an edit reads.

An edit reads as a unified-diff hunk in a `<file_sep>` chunk, a form code models have seen::

    @@ -12 +12 @@
    -    def area(self, w):
    +    def area(self, width):
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

# How many recent edits a prompt carries, and the lines of each side of one hunk it shows.
MAX_EDITS = 3
MAX_HUNK_LINES = 6
# The window the model rewrites: a few lines before the edit, more after it (the uses of what
# changed mostly come later), cut to a token budget by the caller.
WINDOW_BEFORE = 2
WINDOW_AFTER = 14


@dataclass(frozen=True)
class Hunk:
    """A replaced run of lines: `before` at line `line` (0-based) of the old text became `after`."""

    line: int
    before: tuple[str, ...]
    after: tuple[str, ...]
    line_after: int  # where `after` starts in the new text

    @property
    def new_lines(self) -> range:
        """Lines of the new text this hunk covers (an empty range at a pure deletion)."""
        return range(self.line_after, self.line_after + len(self.after))


def line_hunks(old: str, new: str) -> list[Hunk]:
    """The hunks that turn `old` into `new`, by whole lines, in document order."""
    a, b = old.splitlines(), new.splitlines()
    hunks = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            hunks.append(Hunk(i1, tuple(a[i1:i2]), tuple(b[j1:j2]), j1))
    return hunks


def hunk_text(hunk: Hunk) -> str:
    """One hunk as unified-diff text (long sides shortened: the prompt needs the gist)."""
    def side(mark: str, lines: tuple[str, ...]) -> str:
        shown = lines[:MAX_HUNK_LINES]
        return "".join(f"{mark}{line}\n" for line in shown)

    return f"@@ -{hunk.line + 1} +{hunk.line_after + 1} @@\n" + side("-", hunk.before) + side("+", hunk.after)


def edit_chunks(hunks: list[Hunk]) -> tuple[str, ...]:
    """The prompt's chunks for the most recent hunks, oldest first (the latest sits nearest)."""
    return tuple(hunk_text(h) for h in hunks[-MAX_EDITS:])


def window_lines(line_count: int, line: int, before: int = WINDOW_BEFORE, after: int = WINDOW_AFTER) -> range:
    """The lines of the window around `line`, clipped to the text."""
    first = max(0, line - before)
    return range(first, min(line_count, line + after + 1))


def split_window(text: str, lines: range) -> tuple[str, str, str]:
    """`text` as (prefix, window, suffix) with the window holding whole lines `lines`."""
    parts = text.splitlines(keepends=True)
    start = sum(len(p) for p in parts[: lines.start])
    end = start + sum(len(p) for p in parts[lines.start : lines.stop])
    return text[:start], text[start:end], text[end:]
