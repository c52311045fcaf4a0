"""Connects the document store to tree-sitter: one incrementally parsed tree per document.

The store knows nothing about grammars; it gets trees from `make_tree`, which picks the grammar
from the document's languageId or file extension and returns None for languages without one (they
fall back to line-based context). Snapshots hold a copy of the tree, because tree-sitter edits
trees in place and the worker may still be reading the old one.
"""

from __future__ import annotations

from .syntax import language_for
from .syntax.tree import DocumentTree


class StoreTree:
    """The `SyntaxTree` the document store drives, around the syntax layer's `DocumentTree`."""

    def __init__(self, text: str, spec) -> None:
        self.document = DocumentTree(text, spec)

    def apply_edit(self, start: int, end: int, new_text: str) -> None:
        self.document.apply_edit(start, end, new_text)

    def snapshot(self):
        return self.document.tree.copy()


def make_tree(text: str, language_id: str, uri: str) -> StoreTree | None:
    spec = language_for(language_id, uri)
    return StoreTree(text, spec) if spec is not None else None
