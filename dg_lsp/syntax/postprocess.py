"""Turning raw model output into text that fits the hole it is meant for.

A diffusion model fills a fixed number of positions, so its raw output often runs past the unit
being filled, repeats text that already follows the cursor, or indents with the wrong style.
`postprocess` trims and re-indents one candidate; `adds_syntax_errors` and `rank` use the parser
to prefer candidates that do not break the file.
"""

from __future__ import annotations

import re

from .context import HoleContext
from .kinds import HoleKind
from .languages import LanguageSpec
from .lines import (
    BRACKET_PAIRS,
    CLOSING_BRACKETS,
    indent_width,
    leading_ws,
    opens_block,
    render_indent,
    starts_with_closer,
    tab_width_for,
)
from .tree import parse

_BRACKET_OPENERS = tuple(BRACKET_PAIRS)
_QUOTES = "\"'`"


def _width(line: str, unit: str) -> int:
    """The indentation column of a line in a file indented with `unit`."""
    return indent_width(leading_ws(line), tab_width_for(unit))


def _continues_statement(line: str, spec: LanguageSpec | None) -> bool:
    """True for a line that carries on a compound statement at its own level (`else:`, `} else {`)."""
    stripped = line.strip()
    keywords = spec.continuation_keywords if spec is not None else ()
    return starts_with_closer(line) or any(re.match(rf"{k}\b", stripped) for k in keywords)


def _truncate_in_line(lines: list[str], ctx: HoleContext, spec: LanguageSpec | None) -> list[str]:
    """Keep the hole line, plus the block it opens when the rest of the line is free.

    The fill continues a line, so a following line belongs to it only while it is indented deeper
    than that line; a closer or `else:` at the line's own level is kept, and ends the fill unless
    it opens a further block.
    """
    line_is_free = not ctx.line_after.strip()
    if ctx.kind is HoleKind.REST_OF_LINE and not (
        line_is_free and opens_block(ctx.line_before + lines[0], spec, _BRACKET_OPENERS)
    ):
        return lines[:1]
    base = indent_width(ctx.indent, tab_width_for(ctx.indent_unit))
    kept = [lines[0]]
    for line in lines[1:]:
        width = _width(line, ctx.indent_unit)
        if not line.strip() or width > base:
            kept.append(line)
            continue
        if width == base and _continues_statement(line, spec):
            kept.append(line)
            if opens_block(line, spec, _BRACKET_OPENERS):
                continue
        break
    return kept


def _restyle(line: str, width: int, unit: str) -> str:
    """The line's text at the given indentation column, written in the file's style."""
    if not line.strip():
        return ""
    return render_indent(max(width, 0), unit) + line.lstrip(" \t")


def _fill_fresh_lines(lines: list[str], ctx: HoleContext) -> list[str]:
    """Truncate at dedent and re-indent a fill that starts a line of its own.

    The model continues a prefix whose last line is the hole line's indentation, so the columns of
    its continuation lines are absolute: a line left of the hole's indentation has left the unit
    being filled.  The first line is put at the hole's indentation whatever the model did, since
    the cursor may sit in column 0 of a line that needs indenting.
    """
    while len(lines) > 1 and not lines[0].strip():
        lines = lines[1:]
    before, unit = ctx.line_before, ctx.indent_unit
    threshold = indent_width(ctx.indent, tab_width_for(unit))
    kept = [lines[0]]
    for line in lines[1:]:
        if line.strip() and _width(line, unit) < threshold:
            break
        kept.append(line)
    missing = ctx.indent[len(before) :] if ctx.indent.startswith(before) else ""
    first = missing + kept[0].lstrip(" \t") if kept[0].strip() else ""
    return [first, *(_restyle(line, _width(line, unit), unit) for line in kept[1:])]


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


def _drop_overlap_in_line(text: str, rest: str) -> str:
    """Remove the end of the fill that repeats the start of the rest of the hole line."""
    rest = rest.lstrip()
    last_line = len(text) - text.rfind("\n") - 1
    for size in range(min(len(rest), last_line), 0, -1):
        if text.endswith(rest[:size]) and _safe_overlap(text, size, rest):
            return text[:-size]
    return text


def _strip_trailing(lines: list[str], keep_last_spaces: bool) -> list[str]:
    """Remove trailing whitespace and whitespace-only lines at the end."""
    stripped = [line.rstrip() for line in lines[:-1]]
    stripped.append(lines[-1] if keep_last_spaces else lines[-1].rstrip())
    while len(stripped) > 1 and not stripped[-1].strip():
        stripped.pop()
    return stripped


def postprocess(fill: str, ctx: HoleContext, spec: LanguageSpec | None) -> str:
    """The part of a model's fill that belongs in the hole, re-indented for the file."""
    crlf = "\r\n" in ctx.prefix or "\r\n" in ctx.suffix
    lines = fill.replace("\r\n", "\n").split("\n")
    if ctx.kind is HoleKind.PARAGRAPH:
        result = "\n".join(_strip_trailing(lines, False)).strip("\n")
        return result.replace("\n", "\r\n") if crlf else result
    rest = ctx.line_after
    fresh = not ctx.line_before.strip() and ctx.kind is not HoleKind.REST_OF_LINE
    if fresh:
        lines = _fill_fresh_lines(lines, ctx)
    else:
        lines = _truncate_in_line(lines, ctx, spec)
        unit = ctx.indent_unit
        lines = [lines[0], *(_restyle(line, _width(line, unit), unit) for line in lines[1:])]
    lines = _drop_repeated_lines(lines, ctx, fresh) or [""]
    lines = _strip_trailing(lines, keep_last_spaces=bool(rest.strip()))
    result = "\n".join(lines)
    if not result.strip():
        return ""
    if rest.strip():
        result = _drop_overlap_in_line(result, rest)
        if "\n" in result and rest.lstrip()[:1] in CLOSING_BRACKETS:
            # A multi-line body must not end on the line of the closer that follows it.
            result += "\n" + ctx.indent
    return result.replace("\n", "\r\n") if crlf else result


def _error_count(text: str, spec: LanguageSpec) -> int:
    """How many ERROR and MISSING nodes a fresh parse of the text has."""
    root = parse(text, spec).root_node
    if not root.has_error:
        return 0
    count = 0
    stack = [root]
    while stack:
        node = stack.pop()
        count += node.is_error or node.is_missing
        if node.has_error:
            stack.extend(node.children)
    return count


def adds_syntax_errors(ctx: HoleContext, fill: str, spec: LanguageSpec | None) -> bool:
    """True when prefix+fill+suffix has more syntax errors than prefix+suffix."""
    if spec is None:
        return False
    return _error_count(ctx.prefix + fill + ctx.suffix, spec) > _error_count(
        ctx.prefix + ctx.suffix, spec
    )


def rank(
    candidates: list[tuple[str, float]], ctx: HoleContext, spec: LanguageSpec | None
) -> list[int]:
    """Candidate indices, those adding no syntax errors first, then by score (higher first)."""
    if spec is None:
        penalties = [0] * len(candidates)
    else:
        base = _error_count(ctx.prefix + ctx.suffix, spec)
        penalties = [
            int(_error_count(ctx.prefix + fill + ctx.suffix, spec) > base) for fill, _ in candidates
        ]
    return sorted(range(len(candidates)), key=lambda i: (penalties[i], -candidates[i][1], i))
