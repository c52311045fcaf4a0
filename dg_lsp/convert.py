"""The one place that maps between string offsets and LSP positions.

Everything inside the server works on Python string offsets (code points). LSP positions count
a line's characters in the negotiated encoding: UTF-16 code units by default, UTF-8 bytes or
UTF-32 code points when the client prefers them. Positions from clients can be out of range,
stale or in the middle of a character; they are clamped, never raised on.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from lsprotocol import types

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


def _units(ch: str, encoding: str) -> int:
    code = ord(ch)
    if encoding == UTF16:
        return 2 if code > 0xFFFF else 1
    if encoding == UTF8:
        return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
    return 1


def line_starts(text: str) -> list[int]:
    """Offsets at which each line starts; LSP ends lines at \\n, \\r\\n or \\r."""
    starts = [0]
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\r":
            if i + 1 < n and text[i + 1] == "\n":
                i += 1
            starts.append(i + 1)
        elif ch == "\n":
            starts.append(i + 1)
        i += 1
    return starts


@dataclass(frozen=True)
class Codec:
    """Offset <-> position conversion for one text in one encoding."""

    text: str
    encoding: str = UTF16

    def _starts(self) -> list[int]:
        cached = getattr(self, "_cached_starts", None)
        if cached is None:
            cached = line_starts(self.text)
            object.__setattr__(self, "_cached_starts", cached)
        return cached

    def _line_end(self, line: int) -> int:
        """Offset of the end of a line's content (before its line break)."""
        starts = self._starts()
        end = starts[line + 1] if line + 1 < len(starts) else len(self.text)
        while end > starts[line] and self.text[end - 1] in "\r\n":
            end -= 1
        return end

    def offset(self, position: types.Position) -> int:
        """The string offset of a position, clamped to the document and to character starts."""
        starts = self._starts()
        line = min(max(position.line, 0), len(starts) - 1)
        if position.line >= len(starts):
            return len(self.text)
        start, end = starts[line], self._line_end(line)
        if self.encoding == UTF32:
            return min(start + max(position.character, 0), end)
        budget = max(position.character, 0)
        i = start
        while i < end:
            width = _units(self.text[i], self.encoding)
            if width > budget:
                break
            budget -= width
            i += 1
        return i

    def position(self, offset: int) -> types.Position:
        """The LSP position of a string offset (clamped into the text)."""
        offset = min(max(offset, 0), len(self.text))
        starts = self._starts()
        line = bisect_right(starts, offset) - 1
        start = starts[line]
        offset = min(offset, self._line_end(line)) if offset < len(self.text) or line < len(starts) else offset
        if self.encoding == UTF32:
            return types.Position(line, offset - start)
        return types.Position(line, sum(_units(ch, self.encoding) for ch in self.text[start:offset]))

    def range(self, start: int, end: int) -> types.Range:
        return types.Range(self.position(start), self.position(end))

    def offsets(self, rng: types.Range) -> tuple[int, int]:
        a, b = self.offset(rng.start), self.offset(rng.end)
        return (a, b) if a <= b else (b, a)
