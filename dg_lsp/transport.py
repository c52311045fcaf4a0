"""Byte streams to and from the client: stdio, or one TCP connection, both through `FrameReader`.

pygls' own transports read frames with its trusting parser. Here both transports feed the
hardened reader of `framing.py` (size cap, recovery after garbage, salvaged ids) into the
protocol of `protocol.py`, so a TCP client gets exactly the behaviour a stdio client gets. The
reader runs on a thread because a blocking read is the one way to read stdin that works on every
platform; the event loop only ever sees whole, parsed messages.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import threading
from typing import BinaryIO, Callable

from pygls.lsp.server import LanguageServer

from .framing import FrameReader, parse_body

log = logging.getLogger(__name__)


class StreamWriter:
    """Writes whole frames to the client; a client that stopped reading ends the process."""

    def __init__(self, stream: BinaryIO, on_broken: Callable[[], None]):
        self._stream = stream
        self._on_broken = on_broken

    def write(self, data: bytes) -> None:
        try:
            self._stream.write(data)
            self._stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            log.error("the client's end of the connection is closed; exiting")
            self._on_broken()

    def close(self) -> None:
        try:
            self._stream.close()
        except Exception:
            pass


def start_io(server: LanguageServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Serve over stdio; returns only if the exit hook does."""
    _serve_streams(server, stdin or sys.stdin.buffer, stdout or sys.stdout.buffer)


def start_tcp(server: LanguageServer, host: str, port: int) -> None:
    """Wait for one client on host:port and serve it; the process ends when it disconnects.

    One connection, like stdio: the server holds per-client state (open documents, settings),
    so a second editor should start its own server.
    """
    with socket.create_server((host, port)) as listener:
        log.info("listening on %s:%d", host, port)
        connection, peer = listener.accept()
    log.info("client connected from %s:%d", *peer[:2])
    with connection:
        reading = connection.makefile("rb", buffering=0)
        writing = connection.makefile("wb")
        _serve_streams(server, reading, writing)


def _serve_streams(server: LanguageServer, reading: BinaryIO, writing: BinaryIO) -> None:
    protocol = server.protocol
    protocol.set_writer(StreamWriter(writing, on_broken=lambda: protocol.exit_hook(1)))
    asyncio.run(_serve(server, protocol, reading))


async def _serve(server: LanguageServer, protocol, stream: BinaryIO) -> None:
    loop = asyncio.get_running_loop()
    if getattr(server, "loop", False) is None:
        server.loop = loop  # DgServer sends notifications from threads through it.
    finished = loop.create_future()
    read = getattr(stream, "read1", stream.read)

    def pump() -> None:
        reader = FrameReader(read)
        try:
            while True:
                body = reader.next()
                if body is None:
                    break
                item = parse_body(body) if isinstance(body, bytes) else body
                loop.call_soon_threadsafe(protocol.handle_frame, item)
        except Exception:
            log.exception("the input reader failed")
        finally:
            try:
                loop.call_soon_threadsafe(lambda: finished.done() or finished.set_result(None))
            except RuntimeError:
                pass  # The loop is already closed.

    threading.Thread(target=pump, name="dg-input", daemon=True).start()
    await finished
    protocol.end_of_input()
