"""Turning raw model output into text that fits the hole it is meant for.

A diffusion model fills a fixed number of positions, so its raw output often runs past the unit
being filled, repeats text that already follows the cursor, or indents with the wrong style.
`postprocess` places, trims and re-indents one candidate (where it ends is `fill_end`'s job);
`adds_syntax_errors` and `rank` use the parser to prefer candidates that do not break the file.
A correct fill must come out unchanged: the quality benchmark's reference row checks that.
"""

from __future__ import annotations

from collections.abc import Callable

from .context import HoleContext
from .fill_end import column, fresh_end, insertion_end, rest_of_line_end, salvage_cut, syntax_end
from .kinds import HoleKind
from .languages import LanguageSpec
from .lines import (
    BRACKET_PAIRS,
    CLOSING_BRACKETS,
    indent_width,
    opens_block,
    render_indent,
    tab_width_for,
)
from .tree import ShorterFills, count_errors

_QUOTES = "\"'`"


def _restyle(line: str, width: int, unit: str) -> str:
    """The line's text at the given indentation column, written in the file's style."""
    if not line.strip():
        return ""
    return render_indent(max(width, 0), unit) + line.lstrip(" \t")


def _previous_code_line(prefix: str) -> str:
    """The last non-blank line of the prefix before the hole line."""
    above = prefix[: prefix.rfind("\n") + 1].rstrip().rsplit("\n", 1)
    return above[-1]


def _place_fresh_lines(lines: list[str], ctx: HoleContext, spec: LanguageSpec | None) -> list[str]:
    """Position a fill that starts a line of its own, keeping the model's relative indentation.

    The model continues the prefix, whose last line is the text before the cursor, so it writes
    the rest of the line's indentation itself (it was trained on holes cut from column 0 and from
    inside indentation): its columns stand, only written in the file's style.  When it wrote none
    in column 0 right after a line that opens a block, which cannot be right, the whole fill moves
    right by the hole's inferred indentation, so that continuation lines keep their place.
    """
    while len(lines) > 1 and not lines[0].strip():
        lines = lines[1:]
    unit = ctx.indent_unit
    if ctx.line_before:
        return [lines[0], *(_restyle(line, column(line, unit), unit) for line in lines[1:])]
    shift = 0
    if ctx.indent and lines[0].strip() and column(lines[0], unit) == 0:
        if opens_block(_previous_code_line(ctx.prefix), spec):
            shift = indent_width(ctx.indent, tab_width_for(unit))
    return [_restyle(line, column(line, unit) + shift, unit) for line in lines]


def _drop_repeated_lines(lines: list[str], ctx: HoleContext, fresh: bool) -> list[str]:
    """Drop trailing fill lines that repeat, indentation included, the lines after the hole line."""
    following = [line.rstrip() for line in ctx.suffix.split("\n")[1:] if line.strip()]
    if not following:
        return lines
    full = [ctx.line_before + lines[0], *lines[1:]] if fresh else lines
    for index in range(0 if fresh else 1, len(lines)):
        tail = [line.rstrip() for line in full[index:] if line.strip()]
        if tail and tail == following[: len(tail)]:
            return lines[:index]
    return lines


def _unmatched_closers(text: str) -> set[int]:
    """Positions of closing brackets that no earlier bracket in the text opens."""
    stack: list[str] = []
    unmatched = set()
    for position, char in enumerate(text):
        if char in BRACKET_PAIRS:
            stack.append(BRACKET_PAIRS[char])
        elif char in CLOSING_BRACKETS:
            if stack and stack[-1] == char:
                stack.pop()
            else:
                unmatched.add(position)
    return unmatched


def _safe_overlap(text: str, size: int, rest: str) -> bool:
    """Whether the last `size` characters of the fill can go because the suffix supplies them.

    Closers and quotes may only go when the fill does not need them itself; an overlap may not
    split a word on either side.
    """
    start = len(text) - size
    if text[start].isalnum() and start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        return False
    if text[-1].isalnum() and size < len(rest) and (rest[size].isalnum() or rest[size] == "_"):
        return False
    unmatched = _unmatched_closers(text)
    for position in range(start, len(text)):
        char = text[position]
        if char in CLOSING_BRACKETS and position not in unmatched:
            return False
        if char in _QUOTES and text.count(char) % 2 == 0:
            return False
    return True


def _drop_overlap_in_line(
    text: str, rest: str, keeps_syntax: Callable[[str, str], bool] | None = None
) -> str:
    """Remove the end of the fill that repeats the start of the rest of the hole line.

    `keeps_syntax(shorter, text)` may veto a removal: a one-character overlap such as `=` before
    `= 1` is as likely an operator the fill needs (`==`) as a repeat.
    """
    rest = rest.lstrip()
    last_line = len(text) - text.rfind("\n") - 1
    for size in range(min(len(rest), last_line), 0, -1):
        if text.endswith(rest[:size]) and _safe_overlap(text, size, rest):
            if keeps_syntax is None or keeps_syntax(text[:-size], text):
                return text[:-size]
            return text
    return text


def _strip_trailing(lines: list[str], joins_rest: bool) -> list[str]:
    """Remove trailing whitespace, and whitespace-only lines at the end.

    When text follows the hole on its line, the fill's last line continues into that text, so
    its whitespace is the indentation of the rest of the line and stays, even on a blank line.
    """
    stripped = [line.rstrip() for line in lines[:-1]]
    if joins_rest:
        return [*stripped, lines[-1]]
    stripped.append(lines[-1].rstrip())
    while len(stripped) > 1 and not stripped[-1].strip():
        stripped.pop()
    return stripped


def _no_worse(ctx: HoleContext, spec: LanguageSpec | None) -> Callable[[str, str], bool] | None:
    """A check that one fill leaves the file with no more syntax errors than another."""
    if spec is None:
        return None

    def check(fill: str, other: str) -> bool:
        return count_errors(ctx.prefix + fill + ctx.suffix, spec) <= count_errors(ctx.prefix + other + ctx.suffix, spec)

    return check


def _end(lines: list[str], ctx: HoleContext, spec: LanguageSpec | None, check_syntax: bool) -> int:
    """How many of the placed lines belong to the hole (see `fill_end`)."""
    if ctx.line_after.strip():
        return insertion_end(lines, ctx)
    if ctx.in_text_block:
        # Prose in a docstring has no statements to end; the model's end marker decides.
        return len(lines)
    if ctx.line_before.strip():
        return rest_of_line_end(lines, ctx, spec)
    cut = fresh_end(lines, ctx, spec)
    return syntax_end(lines, cut, ctx, spec, count_errors) if check_syntax else cut


def postprocess(
    fill: str, ctx: HoleContext, spec: LanguageSpec | None, *, check_syntax: bool = True, salvage: bool = True,
) -> str:
    """The part of a model's fill that belongs in the hole, re-indented for the file.

    `check_syntax=False` skips the parses that may move a cut further (for drafts shown while the
    model is still denoising, where speed matters more than the exact end). `salvage=False` keeps
    a fill that breaks the file whole rather than cutting it back to its start that parses (the
    syntax repair asks that way, to see what the model wrote).
    """
    crlf = "\r\n" in ctx.prefix or "\r\n" in ctx.suffix
    lines = fill.replace("\r\n", "\n").split("\n")
    if ctx.kind is HoleKind.PARAGRAPH:
        result = "\n".join(_strip_trailing(lines, False)).strip("\n")
        return result.replace("\n", "\r\n") if crlf else result
    rest = ctx.line_after
    fresh = not ctx.line_before.strip() and not rest.strip()
    unit = ctx.indent_unit
    if fresh:
        lines = _place_fresh_lines(lines, ctx, spec)
    else:
        restyled = [_restyle(line, column(line, unit), unit) for line in lines[1:]]
        if restyled and not lines[-1].strip():
            # A blank last line is the indentation of the text after the hole; it stays as written.
            restyled[-1] = lines[-1]
        lines = [lines[0], *restyled]
    lines = lines[: _end(lines, ctx, spec, check_syntax)]
    if not rest.strip():
        # An insertion's later lines come before the rest of its line, not before the next lines.
        lines = _drop_repeated_lines(lines, ctx, fresh) or [""]
    lines = _strip_trailing(lines, joins_rest=bool(rest.strip()))
    result = "\n".join(lines)
    if not result.strip():
        # Before text on the same line, whitespace alone can be the fill: that line's indentation.
        return result if rest.strip() and ctx.kind is not HoleKind.BLOCK_BODY else ""
    if rest.strip() and not (ctx.in_text_block and not result.rstrip().endswith(rest.strip())):
        # In prose a partial repeat of the rest of the line is ordinary text (a row of dashes).
        result = _drop_overlap_in_line(result, rest, _no_worse(ctx, spec) if check_syntax else None)
        closer = rest.lstrip()[:1] in CLOSING_BRACKETS and ctx.kind is HoleKind.BLOCK_BODY
        if closer and "\n" in result and result[result.rfind("\n") :].strip():
            # A multi-line body between braces on one line must not end on the closer's line.
            result += "\n" + ctx.indent
    if check_syntax and salvage and not ctx.in_text_block:  # (paragraphs returned above)
        kept = result[: salvage_cut(result, ctx, spec, count_errors, ShorterFills)]
        result = kept if kept.strip() else result
    return result.replace("\n", "\r\n") if crlf else result


def adds_syntax_errors(ctx: HoleContext, fill: str, spec: LanguageSpec | None) -> bool:
    """True when prefix+fill+suffix has more syntax errors than prefix+suffix."""
    if spec is None:
        return False
    return count_errors(ctx.prefix + fill + ctx.suffix, spec) > count_errors(
        ctx.prefix + ctx.suffix, spec
    )


def rank(texts: list[str], ctx: HoleContext, spec: LanguageSpec | None) -> list[int]:
    """Indices of `texts`, which come best first from the engine: those adding no syntax errors
    first, the engine's order otherwise.

    Engines order their candidates themselves (finished middles first, then by confidence; a line
    the head ended, greedy first, then the beam's other lines), so a second sort here by mean
    confidence only undid that. On 400 single-line holes of the training split with eight
    candidates, the first offered text was exact for 11 of the 181 lines the head ended when
    ranked by mean confidence, which prefers the beam's short lines of near-certain tokens, and
    for 26 in the engine's order; on the 219 fills the canvas wrote the two differed by one (3
    against 2)."""
    if spec is None:
        return list(range(len(texts)))
    base = count_errors(ctx.prefix + ctx.suffix, spec)
    penalties = [int(count_errors(ctx.prefix + fill + ctx.suffix, spec) > base) for fill in texts]
    return sorted(range(len(texts)), key=lambda i: (penalties[i], i))
