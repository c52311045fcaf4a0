"""What the user changed recently, per document: the edits a next-edit prompt shows, and undos.

Keystrokes arrive one `didChange` at a time; a prompt wants edits as a person would describe
them ("renamed `w` to `width` on line 12"). Changes are grouped into bursts: a burst stays open
while the user keeps editing the same few lines, and closes when an edit lands elsewhere. Each
burst becomes line hunks (`dg_engine.nextedit.line_hunks` between the text before it and after).

An undo (the text returns to one it had a few changes ago) records the reverted change as
`(lines before, lines after)`, so that a suggestion that would make it again is never shown, and
drops the reverted hunks from the history, so the prompt no longer asks to propagate them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from dg_engine.nextedit import MAX_EDITS, Hunk, line_hunks

# An edit more than this many lines away from the open burst starts a new one.
BURST_LINES = 2
KEPT_HUNKS = 8
# Texts remembered (as hashes) to recognise an undo; an editor's undo steps back one group.
KEPT_VERSIONS = 32
KEPT_UNDONE = 16

Pair = tuple[tuple[str, ...], tuple[str, ...]]


def pair(before: tuple[str, ...], after: tuple[str, ...]) -> Pair:
    """A change's identity: its lines without surrounding whitespace."""
    return tuple(s.strip() for s in before), tuple(s.strip() for s in after)


@dataclass
class _Doc:
    text: str
    base: str  # the text when the open burst began
    region: range | None = None  # lines of `text` the open burst touched
    hunks: list[Hunk] = field(default_factory=list)  # closed bursts, oldest first
    versions: deque = field(default_factory=lambda: deque(maxlen=KEPT_VERSIONS))
    undone: deque = field(default_factory=lambda: deque(maxlen=KEPT_UNDONE))


class EditHistory:
    def __init__(self) -> None:
        self._docs: dict[str, _Doc] = {}

    def open(self, uri: str, text: str) -> None:
        doc = _Doc(text, text)
        doc.versions.append(hash(text))
        self._docs[uri] = doc

    def close(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def changed(self, uri: str, text: str, edits: list[tuple[int, int, int]]) -> None:
        """Record the document's new text; `edits` are (start, old end, new length) in order."""
        doc = self._docs.get(uri)
        if doc is None:
            self.open(uri, text)
            return
        old = doc.text
        if not edits or text == old:
            return
        first = old.count("\n", 0, edits[0][0])
        last = first + sum(text.count("\n", s, s + n) for s, _, n in edits)
        if doc.region is not None and (first > doc.region.stop + BURST_LINES or last < doc.region.start - BURST_LINES):
            self._close_burst(doc)
        if doc.region is None:
            doc.base = old
            doc.region = range(first, last + 1)
        else:
            doc.region = range(min(doc.region.start, first), max(doc.region.stop, last + 1))
        if hash(text) in doc.versions:
            self._undo(doc, old, text)
        doc.versions.append(hash(text))
        doc.text = text

    def _close_burst(self, doc: _Doc) -> None:
        doc.hunks = (doc.hunks + line_hunks(doc.base, doc.text))[-KEPT_HUNKS:]
        doc.base, doc.region = doc.text, None

    def _undo(self, doc: _Doc, old: str, text: str) -> None:
        reverted = {pair(h.before, h.after) for h in line_hunks(text, old)}
        doc.undone.extend(reverted)
        doc.hunks = [h for h in doc.hunks if pair(h.before, h.after) not in reverted]
        if text == doc.base:
            doc.region = None  # the open burst was undone as a whole

    def recent(self, uri: str) -> list[Hunk]:
        """The most recent hunks, oldest first, the open burst last."""
        doc = self._docs.get(uri)
        if doc is None:
            return []
        current = line_hunks(doc.base, doc.text) if doc.region is not None else []
        return (doc.hunks + current)[-MAX_EDITS:]

    def undone(self, uri: str) -> frozenset[Pair]:
        doc = self._docs.get(uri)
        return frozenset(doc.undone) if doc is not None else frozenset()
