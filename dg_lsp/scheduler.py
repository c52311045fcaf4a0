"""One compute worker, cancellable jobs, and latest-wins per document.

The model must never run on the LSP event loop, and two model calls at once would only slow each
other down on a CPU, so every model job goes to a single worker thread. Each job carries a
`CancelToken` that the denoising loop checks before every step. A job submitted with a
`supersedes` key cancels the previous job with the same key: a new inline-completion request for a
document makes the older one pointless. A job cancelled before it starts never runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable, Hashable

from dg_engine import Cancelled


class CancelToken:
    """Thread-safe cancellation flag shared by a request's handler and its worker job."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def cancel(self, reason: str = "cancelled") -> None:
        self.reason = reason
        self._event.set()

    def is_cancelled(self) -> bool:
        return self._event.is_set()


def _read_outcome(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


class Scheduler:
    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="dg-compute")
        self._latest: dict[Hashable, CancelToken] = {}
        self._lock = threading.Lock()
        self.superseded = 0
        self.completed = 0

    def submit(
        self, fn: Callable[[CancelToken], Any], token: CancelToken | None = None, supersedes: Hashable | None = None
    ) -> tuple[asyncio.Future, CancelToken]:
        """Run `fn(token)` on the worker; returns an awaitable future and the job's token."""
        token = token or CancelToken()
        if supersedes is not None:
            with self._lock:
                previous = self._latest.get(supersedes)
                self._latest[supersedes] = token
            if previous is not None and not previous.is_cancelled():
                previous.cancel("superseded by a newer request")
                self.superseded += 1

        def run() -> Any:
            if token.is_cancelled():
                raise Cancelled(token.reason or "cancelled before it started")
            try:
                return fn(token)
            finally:
                self.completed += 1
                if supersedes is not None:
                    with self._lock:
                        if self._latest.get(supersedes) is token:
                            del self._latest[supersedes]

        return asyncio.wrap_future(self._pool.submit(run)), token

    def cancel(self, key: Hashable, reason: str) -> bool:
        """Cancel the queued or running job submitted under `key`; returns whether there was one."""
        with self._lock:
            token = self._latest.get(key)
        if token is None or token.is_cancelled():
            return False
        token.cancel(reason)
        return True

    async def run(self, fn: Callable[[CancelToken], Any], supersedes: Hashable | None = None) -> Any:
        """Await a job; if the awaiting handler is cancelled, the job's token is cancelled too."""
        future, token = self.submit(fn, supersedes=supersedes)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            token.cancel("request cancelled by the client")
            # Nobody awaits the job any more; it still ends (with `Cancelled`, at the next step),
            # and asyncio would log that unread exception as an error.
            future.add_done_callback(_read_outcome)
            raise
        finally:
            # A failed job's exception holds this frame through its traceback, and this frame holds
            # the future that holds the exception: without this, what the failed fill allocated
            # waits for the cyclic garbage collector instead of being freed at once.
            del future

    def shutdown(self) -> None:
        with self._lock:
            for token in self._latest.values():
                token.cancel("server shutting down")
        self._pool.shutdown(wait=False, cancel_futures=True)
