"""A small JSON-over-HTTP client for the remote backend, on the standard library only.

The remote backend talks to one OpenAI-compatible server (vLLM, SGLang). What it needs from an
HTTP client is narrow but strict: a request that an editor cancels must close its connection at
once (so the server stops denoising for nobody), a server that does not answer must not hang the
compute worker, and a failed connection may be retried a bounded number of times. `http.client`
does all of that when the exchange runs on a helper thread that the caller watches: the caller
polls the cancel token and the deadline, and on either it shuts the socket down under the helper.
No third-party HTTP library is needed.
"""

from __future__ import annotations

import http.client
import json
import queue
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator
from urllib.parse import urlsplit

from .errors import Cancelled, EngineError

POLL_S = 0.02
RETRY_STATUSES = frozenset({502, 503, 504})
_END = object()


class RemoteError(EngineError):
    """The remote server could not be used for this request; the message says why."""


class RemoteUnavailableError(RemoteError):
    """No answer: connection refused, reset, name not resolved, or a timeout."""


class RemoteResponseError(RemoteError):
    """The server answered, but with an error status or a body that is not the expected JSON."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    root: str  # path prefix before /v1, without a trailing slash

    @classmethod
    def parse(cls, base_url: str) -> "Endpoint":
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        root = parts.path.rstrip("/")
        if root.endswith("/v1"):
            root = root[: -len("/v1")]
        return cls(parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), root)

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.root}{path}"


class _Exchange:
    """One request on its own connection, run on a helper thread; `close` aborts it from outside."""

    def __init__(self, endpoint: Endpoint, connect_timeout: float, read_timeout: float):
        cls = http.client.HTTPSConnection if endpoint.scheme == "https" else http.client.HTTPConnection
        kwargs = {"context": ssl.create_default_context()} if endpoint.scheme == "https" else {}
        self.conn = cls(endpoint.host, endpoint.port, timeout=connect_timeout, **kwargs)
        self.read_timeout = read_timeout
        self.endpoint = endpoint
        self.events: queue.Queue = queue.Queue()
        self.closed = False
        # http.client drops `conn.sock` once a response that ends with the connection is read,
        # while the response still reads from it; this keeps the socket to shut down.
        self.sock: socket.socket | None = None

    def start(self, method: str, path: str, body: bytes | None, headers: dict, stream: bool) -> None:
        threading.Thread(target=self._run, args=(method, path, body, headers, stream), daemon=True,
                         name="dg-remote").start()

    def _run(self, method, path, body, headers, stream) -> None:
        try:
            self.conn.connect()
            self.sock = self.conn.sock
            if self.closed:  # closed while connecting
                raise ConnectionAbortedError("closed")
            self.sock.settimeout(self.read_timeout)
            self.conn.request(method, self.endpoint.root + path, body=body, headers=headers)
            response = self.conn.getresponse()
            if not stream or response.status != 200:
                self.events.put(("response", response.status, response.read()))
            else:
                self.events.put(("status", response.status, b""))
                for line in response:
                    self.events.put(("line", 0, line))
            self.events.put(("end", 0, b""))
        except BaseException as exc:  # Reported to the waiting caller, who decides what it means.
            self.events.put(("error", 0, exc))

    def close(self) -> None:
        """Close the connection now; a blocked read on the helper thread fails at once."""
        self.closed = True
        sock = self.sock or self.conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.conn.close()


class JsonClient:
    """GET and POST JSON to one server, with a deadline, cancellation by closing, and retries."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 30.0,
                 connect_timeout: float = 3.0, retries: int = 1, backoff: float = 0.25):
        self.endpoint = Endpoint.parse(base_url)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retries = retries
        self.backoff = backoff
        self.open_exchanges = 0  # connections not yet closed; tests watch it go back to zero

    def get(self, path: str, cancel=None, timeout: float | None = None) -> Any:
        return self._call("GET", path, None, cancel, timeout)

    def post(self, path: str, payload: dict, cancel=None, timeout: float | None = None) -> Any:
        return self._call("POST", path, payload, cancel, timeout)

    def _call(self, method: str, path: str, payload, cancel, timeout) -> Any:
        attempt = 0
        while True:
            try:
                status, body = self._once(method, path, payload, cancel, timeout)
                if status in RETRY_STATUSES and attempt < self.retries:
                    raise _Retry(RemoteResponseError(_status_message(self.endpoint, path, status, body), status))
                return _decode(self.endpoint, path, status, body)
            except _Retry as retry:
                attempt += 1
                self._pause(attempt, cancel, retry.error)
            except RemoteUnavailableError as exc:
                if attempt >= self.retries:
                    raise
                attempt += 1
                self._pause(attempt, cancel, exc)

    def _pause(self, attempt: int, cancel, error: Exception) -> None:
        end = time.monotonic() + self.backoff * attempt
        while time.monotonic() < end:
            if cancel is not None and cancel.is_cancelled():
                raise Cancelled("the request was cancelled") from error
            time.sleep(POLL_S)

    def _once(self, method, path, payload, cancel, timeout) -> tuple[int, bytes]:
        exchange = self._start(method, path, payload, stream=False)
        try:
            kind, status, data = self._wait(exchange, cancel, time.monotonic() + (timeout or self.timeout), path)
        finally:
            self._finish(exchange)
        if kind == "error":
            raise _unavailable(self.endpoint, path, data)
        return status, data

    def stream(self, path: str, payload: dict, cancel=None, timeout: float | None = None) -> Iterator[dict]:
        """Server-sent events of a streaming request, each `data:` line decoded as JSON.

        The connection is closed when the iterator ends, fails, is cancelled or is dropped.
        A failure before the first event is retried like any other request.
        """
        attempt, yielded = 0, False
        while True:
            exchange = self._start("POST", path, payload, stream=True)
            deadline = time.monotonic() + (timeout or self.timeout)
            try:
                kind, status, data = self._wait(exchange, cancel, deadline, path)
                if kind == "error":
                    raise _unavailable(self.endpoint, path, data)
                if kind == "response":
                    if status in RETRY_STATUSES and attempt < self.retries:
                        raise _Retry(RemoteResponseError(_status_message(self.endpoint, path, status, data), status))
                    _decode(self.endpoint, path, status, data)  # raises for an error status
                    raise RemoteResponseError(f"{self.endpoint.url(path)} answered without a stream", status)
                for event in self._events(exchange, cancel, deadline, path):
                    yielded = True
                    yield event
                return
            except _Retry as retry:
                attempt += 1
                self._finish(exchange)
                self._pause(attempt, cancel, retry.error)
            except RemoteUnavailableError as exc:
                self._finish(exchange)
                if yielded or attempt >= self.retries:
                    raise
                attempt += 1
                self._pause(attempt, cancel, exc)
            finally:
                self._finish(exchange)

    def _events(self, exchange: _Exchange, cancel, deadline: float, path: str) -> Iterator[dict]:
        while True:
            kind, _, data = self._wait(exchange, cancel, deadline, path)
            if kind == "end":
                return
            if kind == "error":
                raise _unavailable(self.endpoint, path, data)
            line = data.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            text = line[len("data:"):].strip()
            if text == "[DONE]":
                return
            try:
                yield json.loads(text)
            except json.JSONDecodeError:
                raise RemoteResponseError(f"{self.endpoint.url(path)} sent an event that is not JSON: {text[:200]!r}") from None

    def _start(self, method: str, path: str, payload, stream: bool) -> _Exchange:
        exchange = _Exchange(self.endpoint, self.connect_timeout, self.timeout)
        body = None if payload is None else json.dumps(payload).encode()
        headers = dict(self.headers, **({"Accept": "text/event-stream"} if stream else {}))
        self.open_exchanges += 1
        exchange.start(method, path, body, headers, stream)
        return exchange

    def _finish(self, exchange: _Exchange) -> None:
        if not exchange.closed:
            exchange.close()
            self.open_exchanges -= 1

    def _wait(self, exchange: _Exchange, cancel, deadline: float, path: str):
        """The next event of the exchange; closes it and raises on cancellation or the deadline."""
        while True:
            if cancel is not None and cancel.is_cancelled():
                self._finish(exchange)
                raise Cancelled("the request was cancelled")
            if time.monotonic() > deadline:
                self._finish(exchange)
                raise RemoteUnavailableError(f"{self.endpoint.url(path)} did not answer within the timeout")
            try:
                return exchange.events.get(timeout=POLL_S)
            except queue.Empty:
                continue


class _Retry(Exception):
    def __init__(self, error: Exception):
        self.error = error


def _unavailable(endpoint: Endpoint, path: str, exc: BaseException) -> RemoteUnavailableError:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        why = "timed out"
    elif isinstance(exc, ConnectionRefusedError):
        why = "connection refused"
    elif isinstance(exc, socket.gaierror):
        why = f"cannot resolve {endpoint.host}"
    else:
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return RemoteUnavailableError(f"cannot reach {endpoint.url(path)} ({why})")


def _status_message(endpoint: Endpoint, path: str, status: int, body: bytes) -> str:
    detail = body.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(detail)
        error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        detail = error.get("message", detail) if isinstance(error, dict) else str(error)
    except (json.JSONDecodeError, AttributeError):
        pass
    return f"{endpoint.url(path)} answered {status}: {detail[:300]}"


def _decode(endpoint: Endpoint, path: str, status: int, body: bytes) -> Any:
    if status != 200:
        raise RemoteResponseError(_status_message(endpoint, path, status, body), status)
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RemoteResponseError(f"{endpoint.url(path)} answered with a body that is not JSON: {body[:200]!r}", status) from None
