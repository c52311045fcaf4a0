"""The document store: the text, version and syntax tree of every open document.

Changes arrive as LSP ranges in the negotiated position encoding. The store converts each range
against the text as it was before that change (through `convert`), splices the text, and hands
the same edit to the document's syntax tree so tree-sitter can reparse incrementally. Readers get
immutable `Snapshot`s, which is what lets the compute worker run while new edits arrive.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Callable, Protocol

from lsprotocol import types

from .convert import Codec

log = logging.getLogger(__name__)

# Documents larger than this are tracked but never sent to the model or parsed.
MAX_DOCUMENT_CHARS = 1_000_000


class SyntaxTree(Protocol):
    def apply_edit(self, start: int, end: int, new_text: str) -> None: ...


TreeFactory = Callable[[str, str, str], "SyntaxTree | None"]  # (text, language_id, uri)


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of one document at one version, safe to hand to another thread."""

    uri: str
    version: int
    language_id: str
    text: str
    tree: object | None = None

    @property
    def too_large(self) -> bool:
        return len(self.text) > MAX_DOCUMENT_CHARS

    def codec(self, encoding: str) -> Codec:
        return Codec(self.text, encoding)

    def digest(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class _Document:
    uri: str
    version: int
    language_id: str
    text: str
    tree: SyntaxTree | None = None
    edits: int = field(default=0)


class DocumentStore:
    def __init__(self, tree_factory: TreeFactory | None = None):
        self._docs: dict[str, _Document] = {}
        self._tree_factory = tree_factory
        self.encoding = "utf-16"

    def __contains__(self, uri: str) -> bool:
        return uri in self._docs

    def uris(self) -> list[str]:
        return list(self._docs)

    def _tree(self, text: str, language_id: str, uri: str):
        if self._tree_factory is None or len(text) > MAX_DOCUMENT_CHARS:
            return None
        try:
            return self._tree_factory(text, language_id, uri)
        except Exception:  # A grammar failing must never cost the user their document.
            log.exception("could not parse %s", uri)
            return None

    def open(self, item: types.TextDocumentItem) -> None:
        self._docs[item.uri] = _Document(
            item.uri, item.version, item.language_id, item.text, self._tree(item.text, item.language_id, item.uri)
        )

    def close(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def change(self, uri: str, version: int, changes: list) -> list[tuple[int, int, int]]:
        """Apply changes in order; returns each as (start, old end, new length) in the text it
        applied to, so that offsets kept elsewhere can be shifted."""
        doc = self._docs.get(uri)
        if doc is None:
            log.warning("change for a document that is not open: %s", uri)
            return []
        applied = []
        for change in changes:
            if isinstance(change, types.TextDocumentContentChangePartial) and change.range is not None:
                start, end = Codec(doc.text, self.encoding).offsets(change.range)
                applied.append((start, end, len(change.text)))
                doc.text = doc.text[:start] + change.text + doc.text[end:]
                if doc.tree is not None:
                    try:
                        doc.tree.apply_edit(start, end, change.text)
                    except Exception:
                        log.exception("incremental parse failed for %s; reparsing", uri)
                        doc.tree = self._tree(doc.text, doc.language_id, uri)
            else:
                applied.append((0, len(doc.text), len(change.text)))
                doc.text = change.text
                doc.tree = self._tree(doc.text, doc.language_id, uri)
        doc.version = version
        doc.edits += 1
        return applied

    def snapshot(self, uri: str) -> Snapshot | None:
        doc = self._docs.get(uri)
        if doc is None:
            return None
        tree = getattr(doc.tree, "snapshot", lambda: None)() if doc.tree is not None else None
        return Snapshot(doc.uri, doc.version, doc.language_id, doc.text, tree)
