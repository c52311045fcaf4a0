"""Parsed documents that stay in sync with edits, and str/byte offset conversion.

tree-sitter works in UTF-8 bytes and (row, byte column) points while the rest of the server works
in Python `str` indices.  `Utf8Index` converts between the two without re-encoding the document
for every lookup, and `DocumentTree` applies each edit to the old tree before reparsing, so
tree-sitter can reuse the unchanged parts instead of parsing the whole file on every keystroke.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import tree_sitter

if TYPE_CHECKING:
    from .languages import LanguageSpec

_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def encode(text: str) -> bytes:
    """UTF-8 bytes of the text; lone surrogates (which JSON can carry) are kept, not rejected."""
    return text.encode("utf-8", "surrogatepass")


def _extra_bytes(char: str) -> int:
    """How many bytes beyond one the character takes in UTF-8."""
    code = ord(char)
    if code < 0x800:
        return 1
    return 2 if code < 0x10000 else 3


class Utf8Index:
    """Converts between `str` offsets and UTF-8 byte offsets of one text in O(log n).

    Only the non-ASCII characters are recorded: an offset's byte position is the offset plus the
    extra bytes of the wide characters before it, so pure ASCII text costs nothing.
    """

    __slots__ = ("_byte_starts", "_chars", "_extra", "_length")

    def __init__(self, text: str) -> None:
        self._length = len(text)
        self._chars: list[int] = []
        # `_extra[k]` holds the extra bytes of the first k wide characters.
        self._extra: list[int] = [0]
        self._byte_starts: list[int] = []
        for match in _NON_ASCII.finditer(text):
            index = match.start()
            self._byte_starts.append(index + self._extra[-1])
            self._chars.append(index)
            self._extra.append(self._extra[-1] + _extra_bytes(match.group()))

    def to_byte(self, offset: int) -> int:
        """The byte offset of a `str` offset."""
        return offset + self._extra[bisect_left(self._chars, offset)]

    def to_str(self, byte: int) -> int:
        """The `str` offset of a byte offset; a byte inside a character maps to that character."""
        wide_before = bisect_left(self._byte_starts, byte)
        if wide_before:
            last = wide_before - 1
            width = self._extra[wide_before] - self._extra[last]
            if byte <= self._byte_starts[last] + width:
                # The byte falls inside the last wide character that starts before it.
                return self._chars[last]
        return byte - self._extra[wide_before]

    @property
    def byte_length(self) -> int:
        """The UTF-8 length of the whole text."""
        return self._length + self._extra[-1]


def point_at(text: str, index: Utf8Index, offset: int) -> tuple[int, int]:
    """The tree-sitter point (row, byte column) of a `str` offset."""
    start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset), index.to_byte(offset) - index.to_byte(start)


def new_parser(spec: LanguageSpec) -> tree_sitter.Parser:
    """A parser for the language; parsers are cheap but not shareable between threads."""
    return tree_sitter.Parser(spec.language)


def parse(text: str, spec: LanguageSpec) -> tree_sitter.Tree:
    """A fresh parse of the text."""
    return new_parser(spec).parse(encode(text))


def node_span(node: tree_sitter.Node, index: Utf8Index) -> tuple[int, int]:
    """The `str` offsets a node covers."""
    return index.to_str(node.start_byte), index.to_str(node.end_byte)


@dataclass(frozen=True)
class ErrorSpan:
    """A syntax error: an ERROR node (unparseable text) or a MISSING node (an inserted token)."""

    start: int
    end: int
    missing: bool
    node_type: str


def _hidden_missing_at(node: tree_sitter.Node) -> int:
    """Where a MISSING node of a hidden rule most likely sits, as a byte offset in `node`.

    Such nodes (Python's `_newline` in `return f(x)y`) are absent from `children`, so their place
    is inferred: the first point where two children meet on one line, which is where a statement
    separator went missing, else the node's end.
    """
    children = node.children
    for left, right in zip(children, children[1:]):
        if left.end_point[0] == right.start_point[0]:
            return left.end_byte
    return node.end_byte


def _error_nodes(tree: tree_sitter.Tree) -> list[tuple[tree_sitter.Node, int, int, bool]]:
    """(node, start byte, end byte, missing) for every error, outermost first, in document order.

    Only subtrees flagged with errors are walked. A flagged node with no error of its own and no
    flagged child holds a hidden MISSING node; it is reported as a zero-width MISSING error.
    """
    found = []
    stack = [tree.root_node] if tree.root_node.has_error else []
    while stack:
        node = stack.pop()
        flagged = [child for child in node.children if child.has_error or child.is_error or child.is_missing]
        if node.is_error or node.is_missing:
            found.append((node, node.start_byte, node.end_byte, node.is_missing))
        elif node.has_error and not flagged:
            at = _hidden_missing_at(node)
            found.append((node, at, at, True))
        stack.extend(reversed(flagged))
    return found


def error_spans(tree: tree_sitter.Tree, index: Utf8Index) -> list[ErrorSpan]:
    """Every ERROR and MISSING node, outermost first, in document order."""
    return [
        ErrorSpan(index.to_str(start), index.to_str(end), missing, node.type if node.is_error or node.is_missing else "MISSING")
        for node, start, end, missing in _error_nodes(tree)
    ]


def _errors_in(tree: tree_sitter.Tree) -> int:
    """How many ERROR and MISSING nodes a tree has."""
    return len(_error_nodes(tree))


# One request asks for the error count of the same texts several times (the context without a
# fill for every candidate; a candidate in repair, post-processing and ranking), so recent
# answers are kept, keyed by text and grammar name. The lock keeps the table whole if a caller
# on another thread (the event loop, a batch run) ever counts at the same time as the worker.
_ERROR_COUNTS: OrderedDict[tuple[str, str], int] = OrderedDict()
_ERROR_COUNTS_SIZE = 32
_ERROR_COUNTS_LOCK = threading.Lock()


def _remember(key: tuple[str, str], count: int) -> int:
    with _ERROR_COUNTS_LOCK:
        _ERROR_COUNTS[key] = count
        _ERROR_COUNTS.move_to_end(key)
        while len(_ERROR_COUNTS) > _ERROR_COUNTS_SIZE:
            _ERROR_COUNTS.popitem(last=False)
    return count


def count_errors(text: str, spec: LanguageSpec) -> int:
    """How many ERROR and MISSING nodes a parse of the text has; parsed only when not known."""
    key = (text, spec.name)
    with _ERROR_COUNTS_LOCK:
        known = _ERROR_COUNTS.get(key)
        if known is not None:
            _ERROR_COUNTS.move_to_end(key)
            return known
    return _remember(key, _errors_in(parse(text, spec)))


def remember_errors(text: str, spec: LanguageSpec, tree: tree_sitter.Tree) -> None:
    """Record the error count of a text from a tree already parsed from it (a snapshot's)."""
    _remember((text, spec.name), _errors_in(tree))


def forget_error_counts() -> None:
    """Drop the remembered counts (tests that count parses start from nothing)."""
    with _ERROR_COUNTS_LOCK:
        _ERROR_COUNTS.clear()


def edit_tree(tree: tree_sitter.Tree, text: str, index: Utf8Index, start: int, end: int, new_text: str) -> None:
    """Tell `tree` (of `text`, indexed by `index`) that text[start:end] became `new_text`."""
    start_byte = index.to_byte(start)
    start_point = point_at(text, index, start)
    inserted = encode(new_text)
    last_newline = new_text.rfind("\n")
    if last_newline < 0:
        new_end_point = (start_point[0], start_point[1] + len(inserted))
    else:
        new_end_point = (start_point[0] + new_text.count("\n"), len(encode(new_text[last_newline + 1 :])))
    tree.edit(
        start_byte=start_byte,
        old_end_byte=index.to_byte(end),
        new_end_byte=start_byte + len(inserted),
        start_point=start_point,
        old_end_point=point_at(text, index, end),
        new_end_point=new_end_point,
    )


def reparse_edited(tree: tree_sitter.Tree, text: str, index: Utf8Index, start: int, end: int, new_text: str,
                   spec: LanguageSpec) -> tree_sitter.Tree:
    """The tree of text[:start] + new_text + text[end:], reparsed incrementally from a copy of
    `tree` (the tree of `text`, which stays as it was)."""
    edited = tree.copy()
    edit_tree(edited, text, index, start, end, new_text)
    return new_parser(spec).parse(encode(text[:start] + new_text + text[end:]), edited)


class DocumentTree:
    """A document's text, its language and its tree, kept in sync through `apply_edit`."""

    def __init__(self, text: str, spec: LanguageSpec) -> None:
        self._spec = spec
        self._parser = new_parser(spec)
        self._text = text
        self._index = Utf8Index(text)
        self._tree = self._parser.parse(encode(text))

    @property
    def text(self) -> str:
        return self._text

    @property
    def spec(self) -> LanguageSpec:
        return self._spec

    @property
    def tree(self) -> tree_sitter.Tree:
        return self._tree

    @property
    def index(self) -> Utf8Index:
        return self._index

    def apply_edit(self, start: int, end: int, new_text: str) -> None:
        """Replace text[start:end] with new_text and reparse incrementally from the edited tree."""
        if not 0 <= start <= end <= len(self._text):
            raise ValueError(f"edit range {start}..{end} outside a text of length {len(self._text)}")
        edit_tree(self._tree, self._text, self._index, start, end, new_text)
        self._text = self._text[:start] + new_text + self._text[end:]
        self._index = Utf8Index(self._text)
        self._tree = self._parser.parse(encode(self._text), self._tree)

    def replace_text(self, text: str) -> None:
        """Resynchronise with a whole new text (a full-document change); parses from scratch."""
        self._text = text
        self._index = Utf8Index(text)
        self._tree = self._parser.parse(encode(text))

    def error_ranges(self) -> list[ErrorSpan]:
        """All syntax errors of the current text."""
        return error_spans(self._tree, self._index)

    def has_errors(self, start: int = 0, end: int | None = None) -> bool:
        """True when an error touches or overlaps text[start:end] (the whole text by default)."""
        if not self._tree.root_node.has_error:
            return False
        stop = len(self._text) if end is None else end
        return any(span.start <= stop and span.end >= start for span in self.error_ranges())

    def node_span(self, node: tree_sitter.Node) -> tuple[int, int]:
        """The `str` offsets a node of this tree covers."""
        return node_span(node, self._index)


class ShorterFills:
    """Syntax errors of `prefix + fill[:cut] + suffix` for ever shorter cuts of one fill.

    The whole text is parsed once; each shorter cut is an edit of the previous one, reparsed
    incrementally (about a fifth of a full parse of a 7,000-character context).
    """

    def __init__(self, prefix: str, fill: str, suffix: str, spec: LanguageSpec) -> None:
        self._doc = DocumentTree(prefix + fill + suffix, spec)
        self._start = len(prefix)
        self._end = len(fill)

    def first_error(self) -> int | None:
        """Where the first error of the whole text starts, relative to the fill's start."""
        spans = self._doc.error_ranges()
        return min(span.start for span in spans) - self._start if spans else None

    def errors(self, cut: int) -> int:
        """The error count with the fill cut to `cut` characters; cuts must not grow."""
        if cut > self._end:
            raise ValueError(f"cut {cut} is longer than the previous cut {self._end}")
        self._doc.apply_edit(self._start + cut, self._start + self._end, "")
        self._end = cut
        return _errors_in(self._doc.tree)
