"""Context from other files: the chunks of other documents most like the code at the cursor.

A completion often needs a name defined elsewhere. Each open document inside the workspace is cut
into windows of lines; the windows are scored by how many identifiers they share with the lines
around the cursor, and the best ones, within a token budget, go before the current file's prefix.
Chunks are cached per (uri, version), so a document is re-chunked only after it changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from .documents import MAX_DOCUMENT_CHARS, Snapshot

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
WINDOW_LINES = 16
STRIDE_LINES = 8


@dataclass(frozen=True)
class Chunk:
    uri: str
    start_line: int
    text: str
    identifiers: frozenset[str]


def identifiers(text: str) -> frozenset[str]:
    return frozenset(IDENTIFIER.findall(text))


def chunk_document(snapshot: Snapshot) -> list[Chunk]:
    lines = snapshot.text.splitlines(keepends=True)
    chunks = []
    for start in range(0, max(1, len(lines)), STRIDE_LINES):
        text = "".join(lines[start : start + WINDOW_LINES])
        if text.strip():
            chunks.append(Chunk(snapshot.uri, start, text, identifiers(text)))
    return chunks


def uri_path(uri: str) -> Path | None:
    """The filesystem path of a `file` URI on this machine; None for anything else.

    URIs come from the client unchecked: another host, a NUL byte or a malformed authority
    gives None instead of an exception.
    """
    try:
        parsed = urlparse(uri)
    except ValueError:
        return None
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    path = unquote(parsed.path)
    return Path(path) if "\x00" not in path else None


def inside(uri: str, folders: list[Path]) -> bool:
    """True when the URI is a file inside one of the folders, after resolving `..` and links."""
    path = uri_path(uri)
    if path is None:
        return False
    try:
        real = path.resolve()
    except (OSError, RuntimeError, ValueError):  # RuntimeError: a symlink loop (Python < 3.13)
        return False
    return any(real == f or f in real.parents for f in folders)


RECENT_CLOSED = 8


class ChunkIndex:
    """Chunks of the open documents and of the last few closed ones, re-cut only on change.

    A file the user just edited and closed is often the one the next completion needs, so the
    last `RECENT_CLOSED` closed documents stay available as context (their final text).
    """

    def __init__(self) -> None:
        self._chunks: dict[str, tuple[int, list[Chunk]]] = {}
        self._recent: dict[str, Snapshot] = {}

    def retire(self, snapshot: Snapshot | None) -> None:
        """A document was closed: keep its last text among the recently edited ones."""
        if snapshot is None:
            return
        self._recent.pop(snapshot.uri, None)
        self._recent[snapshot.uri] = snapshot
        while len(self._recent) > RECENT_CLOSED:
            oldest = next(iter(self._recent))
            self._recent.pop(oldest)
            self._chunks.pop(oldest, None)

    def reopened(self, uri: str) -> None:
        self._recent.pop(uri, None)

    def recent(self) -> list[Snapshot]:
        return list(self._recent.values())

    def chunks(self, snapshot: Snapshot) -> list[Chunk]:
        cached = self._chunks.get(snapshot.uri)
        if cached is None or cached[0] != snapshot.version:
            cached = (snapshot.version, chunk_document(snapshot) if len(snapshot.text) <= MAX_DOCUMENT_CHARS else [])
            self._chunks[snapshot.uri] = cached
        return cached[1]

    def best(self, current: Snapshot, offset: int, others: list[Snapshot], budget_chars: int) -> tuple[str, ...]:
        """The most similar chunks of `others` to the code around `offset`, within the budget."""
        around = current.text[max(0, offset - 1500) : offset + 500]
        wanted = identifiers(around)
        if not wanted:
            return ()
        scored = []
        for other in others:
            for chunk in self.chunks(other):
                shared = len(wanted & chunk.identifiers)
                if shared:
                    scored.append((shared / len(chunk.identifiers | wanted), chunk))
        scored.sort(key=lambda item: -item[0])
        picked, used = [], 0
        for _, chunk in scored:
            if used + len(chunk.text) > budget_chars:
                continue
            picked.append(chunk)
            used += len(chunk.text)
        # Most similar last, so it sits closest to the current file's prefix.
        return tuple(f"# {Path(unquote(urlparse(c.uri).path)).name}\n{c.text}" for c in reversed(picked))
