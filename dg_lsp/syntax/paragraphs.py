"""Finding the prose at the cursor: a Markdown paragraph, a comment block or a docstring.

"Rewrite this paragraph" must only touch prose, never the comment markers around it or the code
next to it, and a rewrite of a comment block must be re-wrapped with the same line prefix.  So a
`Paragraph` carries the range of the words inside the markers plus the prefix that starts each of
its continuation lines.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Literal

import tree_sitter

from .languages import LanguageSpec
from .lines import (
    GENERIC_LINE_COMMENTS,
    iter_lines,
    iter_lines_backwards,
    leading_ws,
    line_end,
    line_start,
    line_text,
)
from .tree import Utf8Index, node_span, parse

ParagraphKind = Literal["markdown", "text", "line_comment", "block_comment", "docstring"]


@dataclass(frozen=True)
class Paragraph:
    """Prose to rewrite: text[start:end], whose continuation lines each begin with `prefix`.

    `marker` is the bare comment marker ("#", "//", "*" inside block comments, "" for Markdown
    and docstrings); `prose` is the text with the line prefixes removed.
    """

    start: int
    end: int
    kind: ParagraphKind
    prefix: str
    marker: str
    prose: str

    def rewrap(self, prose: str, width: int = 80) -> str:
        """New prose laid out as a replacement for text[start:end], wrapped to `width` columns."""
        words = " ".join(prose.split())
        if not words:
            return ""
        lines = textwrap.wrap(words, max(20, width - len(self.prefix)), break_on_hyphens=False)
        return ("\n" + self.prefix).join(lines)


def _strip_prefixes(text: str, prefix: str) -> str:
    """The lines of text[start:end] with each continuation line's prefix (loosely) removed."""
    lines = text.split("\n")
    core = prefix.strip()
    cleaned = [lines[0]]
    for line in lines[1:]:
        stripped = line.lstrip()
        if core and stripped.startswith(core):
            stripped = stripped[len(core) :]
            stripped = stripped[1:] if stripped.startswith(" ") else stripped
        cleaned.append(stripped)
    return "\n".join(cleaned)


def _make(text: str, start: int, end: int, kind: ParagraphKind, prefix: str, marker: str) -> Paragraph:
    return Paragraph(start, end, kind, prefix, marker, _strip_prefixes(text[start:end], prefix))


def _line_marker(line: str, markers: tuple[str, ...]) -> str | None:
    """The comment marker a full-line comment starts with, doc-comment variants included."""
    stripped = line.lstrip()
    variants = set(markers)
    if "//" in variants:
        variants |= {"///", "//!"}
    for marker in sorted(variants, key=len, reverse=True):
        if stripped.startswith(marker):
            return marker
    return None


def _comment_body(line: str, marker: str) -> str:
    """The words of a comment line, after its marker."""
    return line.lstrip()[len(marker) :].strip()


def _line_comment_block(text: str, offset: int, markers: tuple[str, ...]) -> Paragraph | None:
    """The run of full-line comments around the cursor with the same marker and indentation.

    A comment line with no words separates paragraphs inside a comment block.
    """
    line = line_text(text, offset)
    marker = _line_marker(line, markers)
    if marker is None or not _comment_body(line, marker):
        return None
    indent = leading_ws(line)

    def belongs(other: str) -> bool:
        return (
            leading_ws(other) == indent
            and _line_marker(other, markers) == marker
            and bool(_comment_body(other, marker))
        )

    first = line_start(text, offset)
    for start, end in iter_lines_backwards(text, offset):
        if not belongs(text[start:end]):
            break
        first = start
    last = line_end(text, offset)
    for start, end in iter_lines(text, offset):
        if not belongs(text[start:end]):
            break
        last = end
    after_marker = first + len(indent) + len(marker)
    words = text[after_marker : line_end(text, first)]
    spaced = words.startswith(" ")
    begin = after_marker + len(words) - len(words.lstrip(" \t"))
    finish = first + len(text[first:last].rstrip())
    return _make(text, begin, finish, "line_comment", indent + marker + (" " if spaced else ""), marker)


def _block_comment(text: str, start: int, end: int, spec: LanguageSpec) -> Paragraph | None:
    """The words inside a /* ... */ style comment, without a leading "*" column."""
    comment = text[start:end]
    pairs = [(o, c) for o, c in spec.block_comments if comment.startswith(o) and comment.endswith(c)]
    pair = pairs[0] if pairs else None
    if pair is None:
        return None
    opener, closer = pair
    inner_start = start + len(opener)
    while inner_start < end and text[inner_start] == opener[-1]:
        inner_start += 1  # "/**" and "/***" doc comments
    inner_end = end - len(closer)
    lines = comment.split("\n")
    star = len(lines) > 1 and all(line.lstrip().startswith("*") for line in lines[1:])
    indent = leading_ws(line_text(text, start))
    if star:
        prefix = leading_ws(lines[1]) + "* "
    else:
        prefix = leading_ws(lines[1]) if len(lines) > 1 else indent + "   "

    def skippable(position: int) -> bool:
        # Whitespace, and the "*" that starts a line of a starred comment, come before the words.
        at_line_start = not text[line_start(text, position) : position].strip()
        return text[position].isspace() or (star and text[position] == "*" and at_line_start)

    begin = inner_start
    while begin < inner_end and skippable(begin):
        begin += 1
    finish = inner_end
    while finish > begin and text[finish - 1].isspace():
        finish -= 1
    if finish <= begin:
        return None
    return _make(text, begin, finish, "block_comment", prefix, "*" if star else "")


def _docstring(text: str, node: tree_sitter.Node, index: Utf8Index) -> Paragraph | None:
    """The words inside a docstring, without its quotes and surrounding blank space."""
    content = [c for c in node.named_children if c.type == "string_content"]
    if not content:
        return None
    begin, finish = node_span(content[0], index)[0], node_span(content[-1], index)[1]
    while begin < finish and text[begin].isspace():
        begin += 1
    while finish > begin and text[finish - 1].isspace():
        finish -= 1
    if finish <= begin:
        return None
    indent = leading_ws(line_text(text, index.to_str(node.start_byte)))
    return _make(text, begin, finish, "docstring", indent, "")


def _markdown(text: str, offset: int, root: tree_sitter.Node, index: Utf8Index) -> Paragraph | None:
    """The Markdown paragraph at the cursor; list item and block quote prefixes stay outside."""
    byte = index.to_byte(offset)
    node = root.descendant_for_byte_range(byte, byte)
    while node is not None and node.type != "paragraph":
        if node.type in ("fenced_code_block", "indented_code_block", "html_block"):
            return None
        node = node.parent
    if node is None:
        return None
    begin, finish = node_span(node, index)
    finish = begin + len(text[begin:finish].rstrip())
    lead = text[line_start(text, begin) : begin]
    prefix = lead if lead.strip(" \t>") == "" else " " * len(lead)
    return Paragraph(begin, finish, "markdown", prefix, "", _strip_prefixes(text[begin:finish], prefix))


def _plain(text: str, offset: int) -> Paragraph | None:
    """Consecutive non-blank lines around the cursor, for text in no known language."""
    if not line_text(text, offset).strip():
        return None
    first = line_start(text, offset)
    for start, end in iter_lines_backwards(text, offset):
        if not text[start:end].strip():
            break
        first = start
    last = line_end(text, offset)
    for _start, end in iter_lines(text, offset):
        if not text[_start:end].strip():
            break
        last = end
    begin = first + len(leading_ws(text[first:last]))
    finish = first + len(text[first:last].rstrip())
    return _make(text, begin, finish, "text", "", "")


def _code_prose(text: str, offset: int, spec: LanguageSpec) -> Paragraph | None:
    """A comment block, block comment or docstring at the cursor in a code file."""
    root = parse(text, spec).root_node
    index = Utf8Index(text)
    # Probe a character, not a gap: the first one of the line when the cursor is in its indentation,
    # the last one when the cursor is at its end.
    first = line_start(text, offset)
    code = line_text(text, offset)
    if not code.strip():
        return None
    probe = offset
    if not text[first:offset].strip():
        probe = first + len(leading_ws(code))
    elif offset >= first + len(code.rstrip()):
        probe = first + len(code.rstrip()) - 1
    node = root.descendant_for_byte_range(index.to_byte(probe), index.to_byte(probe + 1))
    while node is not None:
        if node.type in spec.comment_types:
            start, end = node_span(node, index)
            if any(text.startswith(o, start) for o, _ in spec.block_comments):
                return _block_comment(text, start, start + len(text[start:end].rstrip()), spec)
            return _line_comment_block(text, offset, spec.line_comments)
        if node.type in spec.string_types and spec.docstrings:
            parent = node.parent
            if parent is not None and parent.type == "expression_statement" and parent.named_child_count == 1:
                return _docstring(text, node, index)
            return None
        node = node.parent
    return None


def paragraph_at(text: str, offset: int, spec: LanguageSpec | None) -> Paragraph | None:
    """The prose at the cursor, or None when the cursor is in code or on a blank line."""
    if not 0 <= offset <= len(text):
        return None
    if spec is None:
        return _line_comment_block(text, offset, GENERIC_LINE_COMMENTS) or _plain(text, offset)
    if spec.name == "markdown":
        return _markdown(text, offset, parse(text, spec).root_node, Utf8Index(text))
    return _code_prose(text, offset, spec)
