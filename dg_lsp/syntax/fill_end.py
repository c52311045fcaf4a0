"""Where a model's fill ends: the end of the syntactic unit the hole is for.

A diffusion model fills a fixed canvas, and when it does not write its end marker in time the
text runs on past the unit being filled.  A correct fill, though, may legitimately leave the hole's
block (an `else:`, the end of a nested block, statements back at the level where the suffix
starts), so each rule here only cuts where a correct fill could not go on.  The `*_end` functions
take the fill as lines and return how many of them to keep.  By the shape of the hole:

* an insertion inside a line (text after the cursor): the model's end marker decides, except
  where the fill has rejoined the rest of the line and goes on to copy the lines after it;
* the rest of a line (code before the cursor, nothing after): that line, plus the block it opens;
* a fresh line (only whitespace before the cursor): lines down to the lowest indentation the
  suffix continues at, with `syntax_end` moving that cut on when the cut text breaks the file
  where the whole fill does not.

The last two go on to the end of the fill when it ends in a block whose body is the suffix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from .context import HoleContext
from .kinds import effective_next_indent
from .languages import LanguageSpec
from .lines import (
    BRACKET_PAIRS,
    indent_width,
    is_comment_line,
    leading_ws,
    opens_block,
    starts_with_closer,
    tab_width_for,
)

if TYPE_CHECKING:
    from .tree import ShorterFills

_BRACKET_OPENERS = tuple(BRACKET_PAIRS)


def column(line: str, unit: str) -> int:
    """The indentation column of a line in a file indented with `unit`."""
    return indent_width(leading_ws(line), tab_width_for(unit))


def _continues_statement(line: str, spec: LanguageSpec | None) -> bool:
    """True for a line that carries on a compound statement at its own level (`else:`, `} else {`)."""
    stripped = line.strip()
    keywords = spec.continuation_keywords if spec is not None else ()
    return starts_with_closer(line) or any(re.match(rf"{k}\b", stripped) for k in keywords)


def _following_lines(ctx: HoleContext) -> list[str]:
    """The suffix's lines after the hole line, blank ones left out, without trailing whitespace."""
    return [line.rstrip() for line in ctx.suffix.split("\n")[1:] if line.strip()]


def insertion_end(lines: list[str], ctx: HoleContext) -> int:
    """Lines to keep of a fill inserted before text on the same line.

    The fill may span lines (a span from mid-line to mid-line), so it is not cut at its first line.
    It is cut after a line that ends with the text after the cursor when what it writes next only
    copies the lines after the hole line: the model has rejoined the suffix and written it out.
    """
    rest = ctx.line_after.strip()
    following = _following_lines(ctx)
    for index, line in enumerate(lines[:-1]):
        if not line.rstrip().endswith(rest):
            continue
        tail = [other.rstrip() for other in lines[index + 1 :] if other.strip()]
        copied = tail[:-1] == following[: len(tail) - 1] and (
            not tail or len(following) >= len(tail) and following[len(tail) - 1].startswith(tail[-1])
        )
        if copied:
            return index + 1
    return len(lines)


def rest_of_line_end(lines: list[str], ctx: HoleContext, spec: LanguageSpec | None) -> int:
    """Lines to keep of a fill that completes the hole line: one, unless the line opens a block.

    A block's lines are those indented deeper than the hole line; a closer or `else:` at the line's
    own level is kept too, and ends the fill unless it opens a further block.
    """
    if not opens_block(ctx.line_before + lines[0], spec, _BRACKET_OPENERS):
        return len(lines) if len(lines) > 1 and ends_in_suffix_block(lines, ctx, spec) else 1
    base = indent_width(ctx.indent, tab_width_for(ctx.indent_unit))
    kept = 1
    for line in lines[1:]:
        width = column(line, ctx.indent_unit)
        if not line.strip() or width > base:
            kept += 1
            continue
        if width == base and _continues_statement(line, spec):
            kept += 1
            if opens_block(line, spec, _BRACKET_OPENERS):
                continue
        break
    return kept


def _first_code_line(text: str, spec: LanguageSpec | None) -> str | None:
    """The first line of the text that holds code (not blank, not only a comment)."""
    for line in text.split("\n"):
        if line.strip() and not is_comment_line(line, spec):
            return line
    return None


def _floor(first_column: int, ctx: HoleContext, spec: LanguageSpec | None) -> int:
    """The lowest column a fresh-line fill may reach before it has left the unit being filled.

    The fill sits between the prefix and the suffix, so it may come back out to the level where
    the suffix carries on (a closer or `else:` there means one level deeper) but not further.  At
    the end of a file only this holds: a fill that starts indented does not go on into top-level
    code, which would be a new definition rather than the rest of this one.
    """
    following = _first_code_line(ctx.suffix[len(ctx.line_after) + 1 :], spec)
    if following is None:
        return min(first_column, 1)
    return min(first_column, effective_next_indent(following, spec, ctx.indent_unit))


def _opens_string(text: str) -> bool:
    """True when the text leaves a triple-quoted string open (the suffix must be its rest)."""
    return any(text.count(quote) % 2 for quote in ('"""', "'''"))


def ends_in_suffix_block(lines: list[str], ctx: HoleContext, spec: LanguageSpec | None) -> bool:
    """True when the fill ends inside a block it opens and the suffix is that block's body.

    A fill may leave the hole's block, or run on past the hole line, when it then opens a block
    that the suffix carries on deeper (the end of one method and the header of the next,
    `except:` before the handler's body): the fill connects to what follows, so it ends there.
    A triple-quoted string left open connects the same way.
    """
    full = [ctx.line_before + lines[0], *lines[1:]]
    if spec is not None and spec.docstrings and _opens_string("\n".join(full)):
        return True
    following = _first_code_line(ctx.suffix[len(ctx.line_after) + 1 :], spec)
    if following is None:
        return False
    unit = ctx.indent_unit
    body = effective_next_indent(following, spec, unit)
    # Walking back from the end, an opener left of every line after it is a block still open.
    lowest: int | None = None
    for line in reversed(full):
        if not line.strip():
            continue
        width = column(line, unit)
        still_open = lowest is None or lowest > width
        if still_open and opens_block(line, spec, _BRACKET_OPENERS) and body > width:
            return True
        lowest = width if lowest is None else min(lowest, width)
    return False


def fresh_end(lines: list[str], ctx: HoleContext, spec: LanguageSpec | None) -> int:
    """Lines to keep of a fill that starts a line of its own (already placed at its columns).

    Columns of continuation lines are absolute, since the model continues a prefix whose last line
    is the hole line's indentation.
    """
    unit = ctx.indent_unit
    floor = _floor(column(ctx.line_before + lines[0], unit), ctx, spec)
    for index, line in enumerate(lines[1:], 1):
        if line.strip() and column(line, unit) < floor:
            return len(lines) if ends_in_suffix_block(lines, ctx, spec) else index
    return len(lines)


def syntax_end(
    lines: list[str], cut: int, ctx: HoleContext, spec: LanguageSpec | None,
    count_errors: Callable[[str, LanguageSpec], int],
) -> int:
    """Move a cut further when the cut text breaks the file where the whole fill does not.

    A line-based cut can stop in the middle of a unit that the suffix needs finished (a statement
    whose closing bracket is on a later line of the fill); the shortest longer cut that adds no
    more errors than the whole fill is taken then.  Without a grammar the cut stands.
    """
    if spec is None or cut >= len(lines):
        return cut

    def errors(count: int) -> int:
        return count_errors(ctx.prefix + "\n".join(lines[:count]) + ctx.suffix, spec)

    whole = errors(len(lines))
    if errors(cut) <= whole:
        return cut
    for count in range(cut + 1, len(lines)):
        if lines[count - 1].strip() and errors(count) <= whole:
            return count
    return len(lines)


# Ends of words, numbers and single symbols: where a fill may be cut without splitting a token.
_TOKEN = re.compile(r"\w+|[^\w\s]")
# At most this many shorter texts are parsed per fill, so that a broken file costs a bounded time.
SALVAGE_CUTS = 16


def salvage_cut(
    fill: str, ctx: HoleContext, spec: LanguageSpec | None,
    count_errors: Callable[[str, LanguageSpec], int],
    shorter: Callable[[str, str, str, LanguageSpec], "ShorterFills"],
) -> int:
    """How much of a fill that breaks the file to keep: its longest start that breaks it least.

    A small model often writes the right start and then runs on into text that no longer parses
    (`)values` for a closing bracket). When some token boundary of the fill leaves fewer syntax
    errors than the whole fill, the longest such start with the fewest errors is kept; otherwise
    the fill stands. The first line may be cut at any token boundary, later lines only at their
    ends. Cuts are tried from the first error inside the fill backwards (from the end when the
    first error lies before it), longest first, at most `SALVAGE_CUTS` of them.
    """
    if spec is None or not fill.strip():
        return len(fill)
    if any(ctx.prefix.count(quote) % 2 for quote in ('"""', "'''")):
        # The prefix opens more triple quotes than it closes: it starts inside a docstring (a
        # window cut from a long file), or the hole is in one. A shorter fill may then only pair
        # the quotes differently and parse "better", so the fill stands.
        return len(fill)
    best, fewest = len(fill), count_errors(ctx.prefix + fill + ctx.suffix, spec)
    if fewest == 0:
        return best
    parses = shorter(ctx.prefix, fill, ctx.suffix, spec)
    error_at = parses.first_error()
    limit = error_at if error_at is not None and 0 <= error_at < len(fill) else len(fill)
    # Later lines are kept whole or not at all: a stray start of a line is rarely what was meant.
    first_line = fill.find("\n") if "\n" in fill else len(fill)
    ends = {m.end() for m in _TOKEN.finditer(fill, 0, first_line)} | {i for i, c in enumerate(fill) if c == "\n"}
    ends = sorted((end for end in ends if 0 < end <= limit and end < len(fill)), reverse=True)
    for cut in ends[:SALVAGE_CUTS]:
        count = parses.errors(cut)
        if count < fewest:
            best, fewest = cut, count
            if count == 0:
                break
    return best
