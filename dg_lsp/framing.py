"""Reading LSP frames from a byte stream, without trusting the client.

pygls' reader assumes well-formed input; an editor-side server cannot. `FrameReader` recovers
after garbage between messages, bad or missing Content-Length headers and odd header spelling,
discards a body over `MAX_MESSAGE_BYTES` in chunks without holding it in memory, and salvages the
id of a broken request so that its error reply can name it.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable


log = logging.getLogger(__name__)


MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # A message body over this is discarded unread.
MAX_HEADER_LINE_BYTES = 8192  # A longer "header line" is garbage; only its tail is kept.
SALVAGE_BYTES = 65536  # How much of a broken or oversized body is searched for its id.
READ_CHUNK_BYTES = 65536

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800


_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\S*)[ \t]*\r?\n?\Z", re.IGNORECASE)
_HEADER = re.compile(rb"^[A-Za-z0-9-]+[ \t]*:")
_METHOD_VALUE = re.compile(r'\s*:\s*"')  # a request's method is a string
# An id's value must end where the pair does: a number may be cut short, a string broken into.
_ID_VALUE = re.compile(r'\s*:\s*(-?\d+(?=\s*[,}])|"(?:[^"\\]|\\.)*"(?=\s*(?:[,}]|\Z)))')


# --- Framing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Oversized:
    """A message whose body was over the cap and was discarded; `id` if its start showed one."""

    length: int
    id: int | str | None


@dataclass(frozen=True)
class Unparsable:
    """A framed body that is not UTF-8 JSON; `id` if its text still shows a request's id."""

    reason: str
    id: int | str | None


class FrameReader:
    """Splits a byte stream into message bodies; never holds more than one capped body.

    `read(n)` returns at most n bytes, and b"" at end of input. `next()` returns the next body
    (bytes), an `Oversized` for a discarded one, or None at end of input.
    """

    def __init__(self, read: Callable[[int], bytes], max_message: int = MAX_MESSAGE_BYTES):
        self._read = read
        self._max = max_message
        self._buf = bytearray()
        self._eof = False
        self.skipped_bytes = 0  # garbage between messages
        self.bad_headers = 0  # header blocks without a usable Content-Length
        self._pending: deque = deque()  # items to hand out before the next body

    def _more(self) -> bool:
        if self._eof:
            return False
        data = self._read(READ_CHUNK_BYTES)
        if not data:
            self._eof = True
            return False
        self._buf += data
        return True

    def _line(self) -> bytes | None:
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[: end + 1])
                del self._buf[: end + 1]
                return line
            if len(self._buf) > MAX_HEADER_LINE_BYTES:
                # No header is this long: drop it, but keep the tail, where a header may begin.
                self.skipped_bytes += len(self._buf) - 64
                del self._buf[:-64]
            if not self._more():
                if self._buf:
                    line = bytes(self._buf)
                    self._buf.clear()
                    return line
                return None

    def _take(self, n: int) -> bytes | None:
        while len(self._buf) < n:
            if not self._more():
                return None
        body = bytes(self._buf[:n])
        del self._buf[:n]
        return body

    def _discard(self, n: int) -> bool:
        """Drop the next n bytes of input, a chunk at a time."""
        while n > 0:
            if not self._buf and not self._more():
                return False
            drop = min(n, len(self._buf))
            del self._buf[:drop]
            n -= drop
        return True

    def _skip(self, garbage: bytes) -> None:
        """Bytes outside any frame. If they are a request whose header was broken, answer it."""
        self.skipped_bytes += len(garbage)
        if not garbage.lstrip().startswith(b"{"):
            return  # The tail of a message cut short by its Content-Length: its ids are not a request's.
        msg_id = salvage_id(garbage[:SALVAGE_BYTES].decode("utf-8", "replace"), alone=True)
        if msg_id is not None:
            self._pending.append(Unparsable("a request without a valid Content-Length header was skipped", msg_id))

    def next(self) -> bytes | Oversized | Unparsable | None:
        if self._pending:
            return self._pending.popleft()
        item = self._next()
        if self._pending:
            if item is not None:
                self._pending.append(item)
            return self._pending.popleft()
        return item

    def _next(self) -> bytes | Oversized | None:
        length: int | None = None
        headers = 0
        while True:
            line = self._line()
            if line is None:
                return None
            if not line.strip():
                if length is not None:
                    break
                if headers:
                    self.bad_headers += 1
                    log.warning("a message had no valid Content-Length header; skipped")
                headers = 0
                continue
            match = _CONTENT_LENGTH.search(line)
            if match is not None:
                value = match.group(1)
                length = int(value) if value.isdigit() and len(value) <= 18 else None
                headers += 1
                if match.start() > 0 and not _HEADER.match(line):
                    self._skip(line[: match.start()])
            elif _HEADER.match(line):
                headers += 1
            else:
                self._skip(line)
        if length > self._max:
            head = self._take(min(SALVAGE_BYTES, length))
            if head is None or not self._discard(length - len(head)):
                return None
            text = head.decode("utf-8", "replace")
            log.warning("discarded a message of %d bytes (over the %d-byte cap)", length, self._max)
            return Oversized(length, salvage_id(text))
        return self._take(length)


def salvage_id(text: str, alone: bool = False) -> int | str | None:
    """The id of a request in broken JSON text: a top-level "id" next to a top-level "method".

    Only the first top-level value is read. With `alone`, it must not be followed by more JSON
    structure (a closing bracket or a comma): bytes outside any frame that close an object and go on
    so are the tail of a message cut short by its Content-Length, and that tail's ids are no request's.
    """
    text = text[:SALVAGE_BYTES]
    depth, i, n = 0, 0, len(text)
    found: int | str | None = None
    method = False
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                break
            if depth == 1:
                key = text[i : j + 1]
                if key == '"id"' and found is None:
                    m = _ID_VALUE.match(text, j + 1)
                    if m is not None:
                        try:
                            found = json.loads(m.group(1))
                        except ValueError:
                            found = None
                elif key == '"method"' and _METHOD_VALUE.match(text, j + 1):
                    method = True
            i = j + 1
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth <= 0:  # The first top-level value ended: what follows is another message, or garbage.
                if alone and text[i + 1 :].lstrip()[:1] in ("}", "]", ","):
                    return None  # ...unless it goes on as JSON: then this was an inner value.
                break
        i += 1
    return found if method else None


def parse_body(body: bytes) -> Any:
    """The JSON value of a body, or `Unparsable` with the reason and the id it still shows."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg_id = salvage_id(body[:SALVAGE_BYTES].decode("utf-8", "replace"))
        if isinstance(msg_id, str) and "\ufffd" in msg_id:
            msg_id = None  # The broken bytes are in the id itself: no client would recognise the reply.
        return Unparsable(f"the message is not valid UTF-8 ({exc.reason} at byte {exc.start})", msg_id)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Unparsable(f"the message is not valid JSON: {exc}", salvage_id(text))


# --- The protocol ---------------------------------------------------------------------------------


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)
