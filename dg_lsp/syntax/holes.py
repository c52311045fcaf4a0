"""Finding the spots a user left for the model to fill.

Users mark work for the model in three ways: a placeholder body (`pass`, `...`, `todo!()`), a
marker comment (`// TODO(dg)`), or an empty body with the cursor in it ("Complete this body").
Each becomes a `Hole` whose range is what a fill replaces; callers hand that range straight to
`extract_context`, so a range is chosen to give that function the right hole kind: a placeholder
or marker is replaced as a selection, an empty body is filled at a blank line inside it (a
BLOCK_BODY hole) or right after its opening token (a line that opens a block).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import tree_sitter

from .kinds import is_placeholder
from .languages import DEFAULT_MARKER, LanguageSpec
from .lines import (
    GENERIC_LINE_COMMENTS,
    after_line,
    detect_indent_unit,
    indent_width,
    is_comment_line,
    iter_lines,
    leading_ws,
    line_end,
    line_start,
    line_text,
)
from .paragraphs import Paragraph, paragraph_at
from .tree import Utf8Index, node_span, parse

__all__ = ["Hole", "Paragraph", "enclosing_body", "find_holes", "paragraph_at"]

# Rust's macros that mean "not written yet" are holes wherever they appear.
_EXPLICIT_PLACEHOLDER = re.compile(r"\b(?:todo|unimplemented)!")
_GENERIC_BLOCK_OPENERS = ("/*", "<!--")


HoleOrigin = Literal["placeholder", "marker", "empty"]


@dataclass(frozen=True)
class Hole:
    """A range a fill replaces: `kind` is "placeholder", "marker" or "empty" (an empty body).

    `indent` is the indentation the filled code should start at.
    """

    start: int
    end: int
    indent: str
    kind: HoleOrigin


@functools.cache
def _function_query(spec: LanguageSpec) -> tree_sitter.Query:
    """A query capturing every function node; compiled once per language."""
    pattern = "[" + " ".join(f"({name})" for name in sorted(spec.function_types)) + "] @function"
    return tree_sitter.Query(spec.language, pattern)


def _is_docstring(node: tree_sitter.Node, spec: LanguageSpec) -> bool:
    """True for a statement that is just a string, which Python treats as documentation."""
    return (
        spec.docstrings
        and node.type == "expression_statement"
        and node.named_child_count == 1
        and node.named_children[0].type in spec.string_types
    )


def _body_parts(
    body: tree_sitter.Node, spec: LanguageSpec
) -> tuple[list[tree_sitter.Node], tree_sitter.Node | None]:
    """The statements of a body that are not comments, and its docstring when it has one."""
    statements = [c for c in body.named_children if c.type not in spec.comment_types]
    if statements and _is_docstring(statements[0], spec):
        return statements[1:], statements[0]
    return statements, None


def _hole_over(text: str, index: Utf8Index, node: tree_sitter.Node, kind: HoleOrigin) -> Hole:
    """A hole covering a node, trailing whitespace (some grammars include the newline) left out."""
    start, end = node_span(node, index)
    end = start + len(text[start:end].rstrip())
    return Hole(start, end, leading_ws(line_text(text, start)), kind)


def _placeholder_holes(text: str, root: tree_sitter.Node, index: Utf8Index, spec: LanguageSpec) -> list[Hole]:
    """Functions whose whole body is one placeholder statement."""
    if not spec.placeholders or not spec.function_types:
        return []
    holes = []
    for function in tree_sitter.QueryCursor(_function_query(spec)).captures(root).get("function", []):
        body = function.child_by_field_name("body")
        if body is None or body.type not in spec.block_types:
            continue
        statements, _ = _body_parts(body, spec)
        if len(statements) == 1 and is_placeholder(_node_text(text, index, statements[0]), spec):
            holes.append(_hole_over(text, index, statements[0], "placeholder"))
    return holes


def _node_text(text: str, index: Utf8Index, node: tree_sitter.Node) -> str:
    start, end = node_span(node, index)
    return text[start:end]


def _explicit_holes(text: str, root: tree_sitter.Node, index: Utf8Index, spec: LanguageSpec) -> list[Hole]:
    """Rust's `todo!()` and `unimplemented!()` calls, with their `;` when they are a statement."""
    if spec.name != "rust":
        return []
    holes = []
    for match in _EXPLICIT_PLACEHOLDER.finditer(text):
        node = root.named_descendant_for_byte_range(index.to_byte(match.start()), index.to_byte(match.end()))
        while node is not None and node.type != "macro_invocation":
            node = node.parent
        if node is None or index.to_str(node.start_byte) != match.start():
            continue
        if node.parent is not None and node.parent.type == "expression_statement":
            node = node.parent
        holes.append(_hole_over(text, index, node, "placeholder"))
    return holes


def _comment_marker_holes(
    text: str, root: tree_sitter.Node, index: Utf8Index, spec: LanguageSpec, markers: Sequence[str]
) -> list[Hole]:
    """Comments (per the grammar, so not text in strings) that contain a marker."""
    holes = []
    for marker in markers:
        for match in re.finditer(re.escape(marker), text):
            node = root.descendant_for_byte_range(index.to_byte(match.start()), index.to_byte(match.end()))
            while node is not None and node.type not in spec.comment_types:
                node = node.parent
            if node is not None:
                holes.append(_hole_over(text, index, node, "marker"))
    return holes


def _line_marker_holes(text: str, spec: LanguageSpec | None, markers: Sequence[str]) -> list[Hole]:
    """Marker comments found line by line, for languages without comment nodes (or unknown ones)."""
    openers = tuple(spec.line_comments) if spec is not None else GENERIC_LINE_COMMENTS
    block = tuple(spec.block_comments) if spec is not None else (("/*", "*/"), ("<!--", "-->"))
    holes = []
    for marker in markers:
        for match in re.finditer(re.escape(marker), text):
            first = line_start(text, match.start())
            before = text[first : match.start()]
            found = [(before.rfind(o), "") for o in openers] + [(before.rfind(o), c) for o, c in block]
            position, closer = max(found, default=(-1, ""))
            if position < 0:
                continue
            end = line_end(text, match.start())
            if closer and text.find(closer, match.end(), end) >= 0:
                end = text.find(closer, match.end(), end) + len(closer)
            start = first + position
            end = start + len(text[start:end].rstrip())
            holes.append(Hole(start, end, leading_ws(text[first:end]), "marker"))
    return holes


def find_holes(text: str, spec: LanguageSpec | None, markers: Sequence[str] | None = None) -> list[Hole]:
    """Every placeholder body and marker comment in the text, in document order.

    `markers` are the marker texts to look for (default: the spec's marker, "TODO(dg)").  Without
    a spec only marker comments are found, line by line.
    """
    wanted = [m for m in (markers if markers else [spec.marker if spec else DEFAULT_MARKER]) if m]
    if spec is None:
        holes = _line_marker_holes(text, None, wanted)
    else:
        root = parse(text, spec).root_node
        index = Utf8Index(text)
        holes = _placeholder_holes(text, root, index, spec) + _explicit_holes(text, root, index, spec)
        if spec.comment_types:
            holes += _comment_marker_holes(text, root, index, spec, wanted)
        else:
            holes += _line_marker_holes(text, spec, wanted)
    unique = {(hole.start, hole.end): hole for hole in holes}
    return [unique[key] for key in sorted(unique)]


def _blank_line_in(text: str, low: int, high: int, header_width: int, spec: LanguageSpec) -> int | None:
    """The end of the first blank line after the line holding `low` and before offset `high`.

    In an indentation-based language the body ends at the first code line that is not indented
    deeper than the header, so the search stops there.
    """
    first = line_start(text, low)
    for start, end in iter_lines(text, after_line(text, low)):
        if start <= first or end >= high and not spec.offside:
            return None
        line = text[start:end]
        if not line.strip():
            return end
        dedented = indent_width(leading_ws(line)) <= header_width
        if spec.offside and dedented and not is_comment_line(line, spec):
            return None
    return None


def _empty_body_hole(
    text: str,
    body: tree_sitter.Node,
    docstring: tree_sitter.Node | None,
    index: Utf8Index,
    spec: LanguageSpec,
) -> Hole:
    """Where an empty body's code goes: a blank line inside it, else just after its opening token."""
    owner = body.parent if body.parent is not None else body
    header_indent = leading_ws(line_text(text, index.to_str(owner.start_byte)))
    body_indent = header_indent + detect_indent_unit(text, spec.default_indent)
    body_start, body_end = node_span(body, index)
    braced = text.startswith("{", body_start)
    if braced:
        opening = body_start + 1
        closing = body_end - 1 if text[body_start:body_end].endswith("}") else body_end
    else:
        header = body.prev_sibling
        opening = index.to_str(header.end_byte) if header is not None else body_start
        closing = len(text)
    anchor = node_span(docstring, index)[1] if docstring is not None else opening
    comments = [node_span(c, index)[1] for c in body.named_children if c.type in spec.comment_types]
    width = indent_width(header_indent)
    for low in dict.fromkeys([max([anchor, *comments]), anchor]):
        blank = _blank_line_in(text, low, closing, width, spec)
        if blank is not None:
            line = line_text(text, blank)
            return Hole(blank, blank, line if line else body_indent, "empty")
    return Hole(anchor, anchor, body_indent, "empty")


def _body_hole(text: str, body: tree_sitter.Node, index: Utf8Index, spec: LanguageSpec) -> Hole | None:
    """The hole of a body that is empty or only a placeholder; None for a body with code."""
    statements, docstring = _body_parts(body, spec)
    if not statements:
        return _empty_body_hole(text, body, docstring, index, spec)
    if len(statements) == 1 and is_placeholder(_node_text(text, index, statements[0]), spec):
        return _hole_over(text, index, statements[0], "placeholder")
    return None


def _walk_up(text: str, node: tree_sitter.Node | None, index: Utf8Index, spec: LanguageSpec) -> Hole | None:
    """The innermost empty or placeholder body around `node`, not looking past a function."""
    while node is not None:
        if node.type in spec.function_types:
            body = node.child_by_field_name("body")
            if body is None or body.type not in spec.block_types:
                return None
            return _body_hole(text, body, index, spec)
        if node.type in spec.block_types:
            hole = _body_hole(text, node, index, spec)
            if hole is not None:
                return hole
        node = node.parent
    return None


def enclosing_body(text: str, offset: int, spec: LanguageSpec | None) -> Hole | None:
    """For "Complete this body": the body around `offset` that is empty or only a placeholder.

    A cursor on the blank lines after a header is outside the header's node (Python's empty
    block has no width), so the search is repeated from the last code character before it.
    Unknown languages give None.
    """
    if spec is None or not spec.block_types:
        return None
    root = parse(text, spec).root_node
    index = Utf8Index(text)
    byte = index.to_byte(offset)
    hole = _walk_up(text, root.descendant_for_byte_range(byte, byte), index, spec)
    if hole is not None:
        return hole
    code_end = len(text[:offset].rstrip())
    if code_end == 0:
        return None
    token = root.descendant_for_byte_range(index.to_byte(code_end - 1), index.to_byte(code_end))
    following = token.next_sibling if token is not None else None
    if following is not None and following.type in spec.block_types:
        return _body_hole(text, following, index, spec)
    return _walk_up(text, token, index, spec)
