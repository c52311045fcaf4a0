"""Line and indentation helpers shared by the syntax modules.

The tree tells us where statements begin, but many decisions (what the hole line looks like, how
deep a line is indented, whether a line opens a block) are about lines and must still work while
the code is half typed and the tree is full of errors, or when no grammar exists at all.  These
helpers are the line-based half of that logic; all offsets are `str` indices.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from math import gcd
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .languages import LanguageSpec

#: Comment markers tried when no language is known, longest first so "//" wins over "/".
GENERIC_LINE_COMMENTS = ("///", "//!", "//", "#", "--", ";", "%")

BRACKET_PAIRS = {"(": ")", "[": "]", "{": "}"}
CLOSING_BRACKETS = frozenset(BRACKET_PAIRS.values())


def line_start(text: str, offset: int) -> int:
    """Offset of the first character of the line holding `offset`."""
    return text.rfind("\n", 0, offset) + 1


def line_end(text: str, offset: int) -> int:
    """Offset of the newline ending the line holding `offset` (or len(text) on the last line)."""
    end = text.find("\n", offset)
    return len(text) if end < 0 else end


def after_line(text: str, offset: int) -> int:
    """Offset just past the newline that ends the line holding `offset`."""
    end = line_end(text, offset)
    return end if end == len(text) else end + 1


def line_text(text: str, offset: int) -> str:
    """The line holding `offset`, without its newline."""
    return text[line_start(text, offset) : line_end(text, offset)]


def iter_lines(text: str, start: int = 0) -> Iterator[tuple[int, int]]:
    """(start, end) of each line from the line holding `start` on; `end` excludes the newline."""
    position = line_start(text, start)
    while True:
        end = line_end(text, position)
        yield position, end
        if end >= len(text):
            return
        position = end + 1


def iter_lines_backwards(text: str, offset: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each line before the line holding `offset`, nearest first."""
    position = line_start(text, offset)
    while position > 0:
        end = position - 1
        position = line_start(text, end)
        yield position, end


def leading_ws(line: str) -> str:
    """The indentation of a line: its leading spaces and tabs."""
    return line[: len(line) - len(line.lstrip(" \t"))]


def indent_width(indent: str, tab_width: int = 4) -> int:
    """The column a run of spaces and tabs reaches, with tabs stopping at multiples of tab_width."""
    column = 0
    for char in indent:
        column = (column // tab_width + 1) * tab_width if char == "\t" else column + 1
    return column


def tab_width_for(unit: str) -> int:
    """How many columns a tab counts as when a file indents with `unit`."""
    return 4 if unit == "\t" else max(1, len(unit))


def render_indent(width: int, unit: str) -> str:
    """Indentation reaching column `width`, written with tabs when the file indents with tabs."""
    if unit == "\t":
        return "\t" * (width // 4) + " " * (width % 4)
    return " " * width


def detect_indent_unit(text: str, default: str = "    ") -> str:
    """The file's indentation unit: a tab, or the most plausible number of spaces per level.

    Most files are consistent, so a majority vote between tab- and space-indented lines settles the
    style, and the greatest common divisor of the common space indents gives the step.
    """
    tabs = 0
    widths: Counter[int] = Counter()
    for raw in text.splitlines():
        if not raw.strip():
            continue
        indent = leading_ws(raw)
        if indent.startswith("\t"):
            tabs += 1
        elif indent:
            widths[len(indent)] += 1
    spaces = sum(widths.values())
    if tabs == 0 and spaces == 0:
        return default
    if tabs > spaces:
        return "\t"
    step = 0
    for width, _count in widths.most_common(8):
        step = gcd(step, width)
    return " " * step if step > 1 else (default if default != "\t" else "    ")


def _outside_quotes(code: str, index: int) -> bool:
    """True when `index` lies outside any '...' or "..." literal opened earlier on the line."""
    quote = ""
    position = 0
    while position < index:
        char = code[position]
        if quote:
            if char == "\\":
                position += 1
            elif char == quote:
                quote = ""
        elif char in "\"'`":
            quote = char
        position += 1
    return quote == ""


def strip_trailing_comment(line: str, markers: tuple[str, ...]) -> str:
    """The code part of a line: everything before the first line comment that is not in a string."""
    best = len(line)
    for marker in markers:
        search = 0
        while True:
            found = line.find(marker, search)
            if found < 0 or found >= best:
                break
            if _outside_quotes(line, found):
                best = found
                break
            search = found + 1
    return line[:best]


def comment_markers(spec: LanguageSpec | None) -> tuple[str, ...]:
    """The line comment markers to recognise, the generic set when the language is unknown."""
    if spec is None:
        return GENERIC_LINE_COMMENTS
    return spec.line_comments


def is_comment_line(line: str, spec: LanguageSpec | None) -> bool:
    """True when the line holds only a comment (line comment or a one-line block comment)."""
    stripped = line.strip()
    if not stripped:
        return False
    if any(stripped.startswith(marker) for marker in comment_markers(spec)):
        return True
    block_comments = spec.block_comments if spec is not None else (("/*", "*/"),)
    return any(stripped.startswith(open_) and stripped.endswith(close) for open_, close in block_comments)


def opens_block(line: str, spec: LanguageSpec | None, extra: tuple[str, ...] = ()) -> bool:
    """True when the code on the line ends with a block opener (after removing a trailing comment)."""
    code = strip_trailing_comment(line, comment_markers(spec)).rstrip()
    openers = (spec.block_openers if spec is not None else ("{",)) + extra
    return bool(code) and any(code.endswith(opener) for opener in openers)


def starts_with_closer(line: str) -> bool:
    """True when the line's first token closes a block or bracket."""
    stripped = line.lstrip()
    return bool(stripped) and stripped[0] in CLOSING_BRACKETS
