"""The text a model sees around a hole: a prefix and a suffix cut to token budgets.

A model's context window is small next to a source file, so the text before and after the hole
must be cut.  Cutting mid-statement confuses a model, so cuts fall on syntactic boundaries (the
start of a sibling statement on the way from the hole to the root of the tree) or, failing that,
on line boundaries.  The imports and the signatures of the enclosing functions and classes say a
lot about what belongs in the hole, so when they were cut off they are put back in front of the
prefix, in document order, while the budget allows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import tree_sitter

from .cuts import TokenCounter, cut_prefix, cut_suffix
from .kinds import HoleKind, classify, hole_indent
from .languages import LanguageSpec
from .lines import (
    after_line,
    detect_indent_unit,
    indent_width,
    leading_ws,
    line_end,
    line_start,
    line_text,
)
from .tree import DocumentTree, Utf8Index, node_span, parse, reparse_edited

_WORDS = re.compile(r"\w+|[^\w\s]|\s+")


def approx_tokens(text: str) -> int:
    """A tokenizer-free token estimate (words, punctuation and whitespace runs), for tests."""
    return len(_WORDS.findall(text))


@dataclass(frozen=True)
class Budget:
    """How many tokens of context to keep before and after the hole."""

    prefix_tokens: int = 1536
    suffix_tokens: int = 512


@dataclass(frozen=True)
class HoleContext:
    """A hole and the text around it, ready to be turned into a model prompt.

    `prefix` ends with the hole line's text before the cursor and `suffix` starts with the rest of
    the line, so the line is never split.  `prefix_start`/`suffix_end` are the document offsets
    where the contiguous parts of the prefix and suffix begin and end; the prefix may additionally
    start with imports and signatures taken from before `prefix_start`.
    """

    prefix: str
    suffix: str
    kind: HoleKind
    start: int
    end: int
    indent: str
    selected: str = ""
    indent_unit: str = "    "
    prefix_start: int = 0
    suffix_end: int | None = None
    # The hole lies in a string that began on an earlier line (a docstring): prose, not code.
    in_text_block: bool = False

    @property
    def line_before(self) -> str:
        """The hole line's text before the hole."""
        return self.prefix[self.prefix.rfind("\n") + 1 :]

    @property
    def line_after(self) -> str:
        """The hole line's text after the hole."""
        newline = self.suffix.find("\n")
        return self.suffix if newline < 0 else self.suffix[:newline]


def _ancestors(root: tree_sitter.Node, start_byte: int, end_byte: int) -> list[tree_sitter.Node]:
    """The smallest node spanning the byte range and all its ancestors, innermost first."""
    node = root.descendant_for_byte_range(start_byte, end_byte)
    chain = []
    while node is not None:
        chain.append(node)
        node = node.parent
    return chain


def _scope_chain(
    text: str,
    root: tree_sitter.Node,
    index: Utf8Index,
    start: int,
    end: int,
    spec: LanguageSpec,
    indent: str,
) -> list[tree_sitter.Node]:
    """The hole's ancestors, innermost first, including blocks the hole ends by indentation.

    In an indentation-based language a hole on a blank line after a body's last statement lies
    outside that body's node, yet belongs to it when it is indented deeper than the body's header;
    those nodes are found from the last code character before the hole.
    """
    chain = _ancestors(root, index.to_byte(start), index.to_byte(end))
    code_end = len(text[:start].rstrip())
    if not spec.offside or code_end == 0 or text[code_end:start].strip():
        return chain
    column = indent_width(indent)
    inner = []
    for node in _ancestors(root, index.to_byte(code_end - 1), index.to_byte(code_end)):
        if node in chain:
            break
        header = line_text(text, index.to_str(node.start_byte))
        if node.type in spec.scope_types and indent_width(leading_ws(header)) < column:
            inner.append(node)
        elif node.type in spec.block_types and node.parent is not None:
            # Blocks carry the sibling statements that are the natural places to cut.
            parent_header = line_text(text, index.to_str(node.parent.start_byte))
            if indent_width(leading_ws(parent_header)) < column:
                inner.append(node)
    return inner + chain


def _syntactic_cuts(
    text: str, chain: list[tree_sitter.Node], index: Utf8Index, start: int, end: int
) -> tuple[set[int], set[int]]:
    """Line starts before the hole and line ends after it where a sibling statement begins/ends."""
    start_byte, end_byte = index.to_byte(start), index.to_byte(end)
    before: set[int] = set()
    after: set[int] = set()
    for node in chain:
        if node.start_byte < start_byte:
            before.add(index.to_str(node.start_byte))
        if node.end_byte > end_byte:
            after.add(index.to_str(node.end_byte))
        for child in node.named_children:
            if child.end_byte <= start_byte:
                before.add(index.to_str(child.start_byte))
            elif child.start_byte >= end_byte:
                after.add(index.to_str(child.end_byte))
    starts = {line_start(text, o) for o in before if not text[line_start(text, o) : o].strip()}
    ends = {after_line(text, o) for o in after if not text[o : line_end(text, o)].strip()}
    return starts, ends


def _signature_spans(
    text: str, chain: list[tree_sitter.Node], index: Utf8Index, spec: LanguageSpec
) -> list[tuple[int, int]]:
    """Line ranges of the enclosing functions' and classes' headers, innermost first."""
    spans = []
    for node in chain:
        body = node.child_by_field_name("body")
        if node.type not in spec.scope_types or body is None:
            continue
        # Python decorators sit in a wrapper node above the definition; they are part of the header.
        decorated = node.parent is not None and node.parent.type == "decorated_definition"
        outer = node.parent if decorated and node.parent is not None else node
        begin = line_start(text, index.to_str(outer.start_byte))
        body_start = index.to_str(body.start_byte)
        if text.startswith("{", body_start) or body.prev_sibling is None:
            finish = after_line(text, body_start)
        else:
            header_end = index.to_str(body.prev_sibling.end_byte)
            finish = after_line(text, max(begin, header_end - 1))
        spans.append((begin, finish))
    return spans


def _import_spans(
    text: str, root: tree_sitter.Node, index: Utf8Index, spec: LanguageSpec
) -> list[tuple[int, int]]:
    """Line ranges of the top-level import statements, in document order."""
    spans = []
    for child in root.named_children:
        if child.type in spec.import_types:
            begin, finish = node_span(child, index)
            spans.append((line_start(text, begin), after_line(text, max(begin, finish - 1))))
    return spans


def _choose_headers(
    spans: Iterable[tuple[int, int]], cut: int, limit: int, count: _Counter
) -> list[tuple[int, int]]:
    """The header spans (clipped to the cut) that fit in `limit` tokens, by priority order."""
    chosen: list[tuple[int, int]] = []
    used = 0
    for begin, finish in spans:
        finish = min(finish, cut)
        if begin >= finish or any(b <= begin < f for b, f in chosen):
            continue
        cost = count(begin, finish)
        if used + cost <= limit:
            chosen.append((begin, finish))
            used += cost
    return sorted(chosen)


def _in_text_block(text: str, chain: list[tree_sitter.Node], index: Utf8Index, start: int, spec: LanguageSpec) -> bool:
    """True when a string node around the hole starts on an earlier line than the hole's."""
    hole_line = line_start(text, start)
    return any(
        node.type in spec.string_types and index.to_str(node.start_byte) < hole_line for node in chain
    )


def _tree_for(
    text: str, spec: LanguageSpec, tree: DocumentTree | tree_sitter.Tree | None
) -> tuple[tree_sitter.Tree, Utf8Index]:
    """Reuse the caller's up-to-date tree, else parse.

    A bare `tree_sitter.Tree` is a document snapshot's copy, parsed from exactly this text (the
    store edits text and tree together); it is only read, never edited, so it stays the
    snapshot's.  A `DocumentTree` is checked against the text, since it may have moved on.
    """
    if isinstance(tree, tree_sitter.Tree) and tree.language == spec.language:
        return tree, Utf8Index(text)
    if isinstance(tree, DocumentTree) and tree.spec == spec and tree.text == text:
        return tree.tree, tree.index
    return parse(text, spec), Utf8Index(text)


def extract_context(
    text: str,
    start: int,
    end: int,
    spec: LanguageSpec | None,
    budget: Budget = Budget(),
    count_tokens: Callable[[str], int] = approx_tokens,
    *,
    kind: HoleKind | None = None,
    tree: DocumentTree | tree_sitter.Tree | None = None,
) -> HoleContext:
    """The hole at text[start:end] with its prefix and suffix cut to the budget.

    `kind` overrides the classification (the rewrite feature passes PARAGRAPH); `tree` (a
    `DocumentTree`, or a snapshot's tree of exactly this text) lets the caller skip the parse of the
    whole document.  Without a spec, cuts fall on lines.
    """
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"hole {start}..{end} outside a text of length {len(text)}")
    hole_kind = kind if kind is not None else classify(text, start, end, spec)
    unit = detect_indent_unit(text, spec.default_indent if spec is not None else "    ")
    count = TokenCounter(text, count_tokens)
    chain: list[tree_sitter.Node] = []
    before_cuts = after_cuts = None
    index = None
    in_text = False
    indent = hole_indent(text, start, hole_kind, spec, unit)
    if spec is not None:
        parsed, index = _tree_for(text, spec, tree)
        chain = _scope_chain(text, parsed.root_node, index, start, end, spec, indent)
        in_text = _in_text_block(text, chain, index, start, spec)
        steady, steady_index, steady_chain = text, index, chain
        if count(0, start) > budget.prefix_tokens or count(end, len(text)) > budget.suffix_tokens:
            # The cuts and headers come from the document without the hole's lines: a line being
            # typed is mostly broken, and each way of breaking it can make the parser recover into
            # a different tree (a class that encloses the hole at one keystroke and not the next),
            # while the window should stay put for the engine's prefix cache.
            begin, finish = line_start(text, start), line_end(text, end)
            blank = re.sub(r"[^\n]", " ", text[begin:finish])
            steady = text[:begin] + blank + text[finish:]  # every offset stays where it was
            steady_index = Utf8Index(steady)
            steady_tree = reparse_edited(parsed, text, index, begin, finish, blank, spec)
            steady_chain = _scope_chain(steady, steady_tree.root_node, steady_index, start, end, spec, indent)
        before_cuts, after_cuts = _syntactic_cuts(steady, steady_chain, steady_index, start, end)
    cut = cut_prefix(text, start, before_cuts, budget.prefix_tokens, count)
    headers: list[tuple[int, int]] = []
    if spec is not None and index is not None and cut > 0:
        spans = (_signature_spans(steady, steady_chain, steady_index, spec)
                 + _import_spans(steady, steady_chain[-1], steady_index, spec))
        # Headers may use half the budget. They are chosen once, against the cut with the whole
        # budget, and the cut then moves on to make room: a cut later than the one the headers
        # were chosen against leaves every chosen header cut off, so none repeats in the window.
        # (Re-choosing them against the new cut until nothing changes could flip between two
        # choices from one keystroke to the next, each time changing the whole prompt.)
        headers = _choose_headers(spans, cut, budget.prefix_tokens // 2, count)
        spent = sum(count(b, f) for b, f in headers)
        cut = cut_prefix(text, start, before_cuts, budget.prefix_tokens - spent, count)
        headers = [(b, min(f, cut)) for b, f in headers if b < cut]
    suffix_end = cut_suffix(text, end, after_cuts, budget.suffix_tokens, count)
    prefix = "".join(text[b:f] for b, f in headers) + text[cut:start]
    return HoleContext(
        prefix=prefix,
        suffix=text[end:suffix_end],
        kind=hole_kind,
        start=start,
        end=end,
        indent=indent,
        selected=text[start:end],
        indent_unit=unit,
        prefix_start=cut,
        suffix_end=suffix_end,
        in_text_block=in_text,
    )
