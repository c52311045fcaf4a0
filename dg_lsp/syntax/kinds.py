"""What kind of hole the cursor or selection is, and what indentation its text should have.

The kind decides how much text the model may produce (the rest of a line, some statements, a whole
body), so it is worked out from what an editor user sees: the text around the cursor on its line
and the lines above and below.  The rules are line-based on purpose: the user is usually typing,
so the tree around the cursor is often an ERROR node, while the lines are always there.
"""

from __future__ import annotations

import enum
import re

from .languages import LanguageSpec
from .lines import (
    after_line,
    indent_width,
    is_comment_line,
    iter_lines,
    iter_lines_backwards,
    leading_ws,
    line_end,
    line_start,
    opens_block,
    render_indent,
    starts_with_closer,
    tab_width_for,
)

_TRIPLE_QUOTES = ('"""', "'''")
_STRING_PREFIX = re.compile(r"^[rRbBuUfF]{0,2}")


class HoleKind(enum.Enum):
    """The shape of the text a hole expects."""

    REST_OF_LINE = "rest_of_line"
    NEW_LINE = "new_line"
    BLOCK_BODY = "block_body"
    SELECTION = "selection"
    PARAGRAPH = "paragraph"


def is_placeholder(statement: str, spec: LanguageSpec | None) -> bool:
    """True when a statement only stands in for a body (`pass`, `...`, `todo!()`)."""
    if spec is None:
        return False
    code = statement.strip().removesuffix(";").strip()
    return any(re.fullmatch(pattern, code, re.DOTALL) for pattern in spec.placeholders)


def _starts_string(line: str, quote: str) -> bool:
    """True when the line's code is a string literal opening with `quote` (a docstring's shape)."""
    return _STRING_PREFIX.sub("", line.strip()).startswith(quote)


def _docstring_start(text: str, start: int, end: int) -> int | None:
    """If the line text[start:end] ends a docstring-shaped string, the start of its first line.

    Only a statement that is nothing but a triple-quoted string counts, so the last line of an
    assignment of a triple-quoted string is code, not something to skip.
    """
    stripped = text[start:end].strip()
    quote = next((q for q in _TRIPLE_QUOTES if stripped.endswith(q)), None)
    if quote is None:
        return None
    if stripped.count(quote) >= 2:
        return start if _starts_string(stripped, quote) else None
    for other_start, other_end in iter_lines_backwards(text, start):
        if quote in text[other_start:other_end]:
            return other_start if _starts_string(text[other_start:other_end], quote) else None
    return None


def previous_code_line(text: str, offset: int, spec: LanguageSpec | None) -> tuple[int, int] | None:
    """The nearest line above `offset` that is not blank, a comment, or (Python) a docstring."""
    position = line_start(text, offset)
    while position > 0:
        start, end = next(iter_lines_backwards(text, position))
        position = start
        line = text[start:end]
        if not line.strip() or is_comment_line(line, spec):
            continue
        if spec is not None and spec.docstrings:
            docstring = _docstring_start(text, start, end)
            if docstring is not None:
                position = docstring
                continue
        return start, end
    return None


def _previous_nonblank(text: str, offset: int) -> str | None:
    """The nearest non-blank line above the line holding `offset`."""
    for start, end in iter_lines_backwards(text, offset):
        if text[start:end].strip():
            return text[start:end]
    return None


def _next_nonblank(text: str, offset: int) -> str | None:
    """The nearest non-blank line below the line holding `offset`."""
    position = after_line(text, offset)
    if position >= len(text) and line_start(text, position) <= offset:
        return None
    for start, end in iter_lines(text, position):
        if text[start:end].strip():
            return text[start:end]
    return None


def _body_rest_is_empty(text: str, offset: int, opener_width: int, spec: LanguageSpec | None) -> bool:
    """True when the block continues after the hole line with only blanks, comments, placeholders."""
    position = after_line(text, offset)
    if position >= len(text) and line_start(text, position) <= offset:
        return True
    for start, end in iter_lines(text, position):
        line = text[start:end]
        if not line.strip() or is_comment_line(line, spec) or is_placeholder(line, spec):
            continue
        if spec is not None and spec.offside:
            return indent_width(leading_ws(line)) <= opener_width
        return starts_with_closer(line)
    return True


def _inline_empty_block(before: str, after: str, spec: LanguageSpec | None) -> bool:
    """True for a cursor between a brace pair on one line, as in `f() {<|>}`."""
    if spec is not None and spec.offside:
        return False
    return before.rstrip().endswith("{") and after.lstrip().startswith("}")


def classify(text: str, start: int, end: int, spec: LanguageSpec | None) -> HoleKind:
    """The kind of hole at text[start:end], judged from the hole's line and its neighbours."""
    if start != end:
        return HoleKind.SELECTION
    first = line_start(text, start)
    before, after = text[first:start], text[start : line_end(text, start)]
    if after.strip():
        # Text after the cursor means an insertion inside a line, except between empty braces.
        if _inline_empty_block(before, after, spec):
            return HoleKind.BLOCK_BODY
        return HoleKind.REST_OF_LINE
    if before.strip():
        return HoleKind.REST_OF_LINE
    opener = previous_code_line(text, start, spec)
    if opener is not None:
        opener_line = text[opener[0] : opener[1]]
        if opens_block(opener_line, spec) and _body_rest_is_empty(
            text, start, indent_width(leading_ws(opener_line)), spec
        ):
            return HoleKind.BLOCK_BODY
    return HoleKind.NEW_LINE


def effective_next_indent(line: str, spec: LanguageSpec | None, unit: str) -> int:
    """The body indentation a following line implies: a closer or `else:` sits one level out."""
    width = indent_width(leading_ws(line), tab_width_for(unit))
    stripped = line.strip()
    keywords = spec.continuation_keywords if spec is not None else ()
    closes = starts_with_closer(line) and not (spec is not None and spec.offside)
    if closes or any(re.match(rf"{word}\b", stripped) for word in keywords):
        return width + indent_width(unit, tab_width_for(unit))
    return width


def hole_indent(
    text: str, start: int, kind: HoleKind, spec: LanguageSpec | None, unit: str
) -> str:
    """The indentation of the hole line, or for a blank line the indentation its code should have.

    A blank line whose cursor already sits after some whitespace keeps it: the editor or the user
    put it there.  In column 0 the indentation is inferred from the neighbouring lines.
    """
    first = line_start(text, start)
    line = text[first : line_end(text, start)]
    if kind in (HoleKind.SELECTION, HoleKind.REST_OF_LINE, HoleKind.PARAGRAPH) or line.strip():
        return leading_ws(line)
    before = text[first:start]
    if before:
        return before
    previous = _previous_nonblank(text, start)
    if previous is None:
        return ""
    if opens_block(previous, spec):
        return leading_ws(previous) + unit
    if kind is HoleKind.BLOCK_BODY:
        return leading_ws(previous)
    following = _next_nonblank(text, start)
    if following is None:
        return ""
    tab = tab_width_for(unit)
    wanted = min(
        indent_width(leading_ws(previous), tab), effective_next_indent(following, spec, unit)
    )
    if indent_width(leading_ws(previous), tab) == wanted:
        return leading_ws(previous)
    return render_indent(wanted, unit)
