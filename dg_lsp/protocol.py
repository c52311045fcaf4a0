"""The JSON-RPC layer, hardened: framing, a size cap, lifecycle errors and a reply for every request.

pygls 2.1 reads the base protocol in `pygls.io_.run_async` and dispatches in `JsonRPCProtocol`.
Both trust their input more than an editor's pipe deserves. This module subclasses the protocol
(`DgProtocol`); `framing.py`'s `FrameReader`, fed by `transport.py` for stdio and TCP alike,
replaces the reader. Together they fill these gaps:

* Framing. Headers are read line by line; `Content-Length` is matched case-insensitively and
  also at the end of a line that starts with garbage, so the reader finds the next message after
  stray bytes. A header block without a valid length is skipped; if the skipped bytes are a
  request (a top-level "id" and "method"), it gets ParseError with its id. pygls instead needs
  the exact line `Content-Length: N\\r\\n` and can lose every later message after one bad header.
  A Content-Length larger than the body cannot be told from a slow client: the reader waits for
  that many bytes and takes the messages that follow as part of the body, so they are lost (the
  broken body is answered with ParseError if its id is readable).
* Size cap. A message over `MAX_MESSAGE_BYTES` is never held in memory: the first
  `SALVAGE_BYTES` are kept to find its id, the rest is read and discarded in chunks, a request
  gets InvalidRequest (-32600) and the server goes on with the next message.
* Parse errors get ParseError (-32700). pygls logs them and answers nothing, so the client waits
  forever. The reply carries the request's id when the broken text still shows a top-level
  `"id"` and `"method"`, otherwise `null` (as JSON-RPC prescribes).
* Invalid params (a position that is a string, a missing field) get InvalidParams (-32602) with
  the id. pygls raises them inside `json.loads`, where the id is already lost.
* Lifecycle. Requests before `initialize` get ServerNotInitialized (-32002) and notifications
  are dropped; a second `initialize` and any request after `shutdown` get InvalidRequest
  (pygls drops them silently, so the client hangs). `exit` ends the process with 0 after
  `shutdown` and 1 without, at once, even while the model is computing (see `lifetime`).
* End of input on stdin ends the process (0 after `shutdown`, 1 without) instead of waiting for
  the compute worker to finish its job.
* Unknown notifications are ignored, `$/` ones without even a log line; unknown requests get
  MethodNotFound (-32601) as before.
* Commands run as an inner handler of pygls' `workspace/executeCommand` generator. A
  `$/cancelRequest` only cancelled the outer future, so the model job kept running; fixed in
  `_run_generator`. pygls also never forgot the futures of inner handlers and of notifications
  handled by generators (every didOpen/didChange/didClose, with its params): a leak per message,
  fixed in `_execute_handler`. `shutdown` cancelled in-flight requests while iterating the dict that the
  cancellations modify; it iterates over a copy here.
* A reply that cannot be serialized is answered with InternalError (-32603) instead of nothing.
* pygls' own copy of each document is updated best effort: a didChange or didClose for a
  document that is not open, or a URI it cannot parse, no longer skips the server's handler
  and shows the user an "Error in server" message.

Test faults. When the environment variable `DG_LSP_TEST_FAULTS=1` is set (never in normal use;
nothing in the settings can turn it on), `install_test_faults` registers extra commands:

* `dg.test.raise` with `{"where": "loop" | "worker"}`: the handler raises, on the event loop or
  inside a compute-worker job; the request must answer InternalError and the server go on.
* `dg.test.oomNextFill` with `{"megabytes": N}`: the next model call allocates N MiB and then
  raises `torch.OutOfMemoryError`, as a device out of memory would.
* `dg.test.gc` with `{"enabled": bool, "collect": bool, "trim": bool}`: switches Python's cyclic
  garbage collector off or on, or runs it, to tell memory freed at once from memory left to the
  collector; `trim` asks glibc to return its free pages (`malloc_trim(0)`), so that RSS shows
  the memory in use rather than what the allocator keeps for later.

They are advertised in the capabilities' command list only when the variable is set.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from concurrent.futures import CancelledError as FutureCancelledError
from functools import partial
from typing import Any, Callable

from lsprotocol import types
from lsprotocol.types import ResponseErrorMessage
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from . import lifetime

log = logging.getLogger(__name__)
from .framing import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, MAX_MESSAGE_BYTES, METHOD_NOT_FOUND, Oversized, PARSE_ERROR, SERVER_NOT_INITIALIZED, Unparsable, _valid_id
from .testfaults import TEST_FAULTS_ENV, install_test_faults  # noqa: F401  (re-exported)


class DgProtocol(LanguageServerProtocol):
    """pygls' LSP protocol with the lifecycle, error replies and cancellation fixes listed above."""

    def __init__(self, server: LanguageServer, converter):
        super().__init__(server, converter)
        self._initialized = False
        self._write_lock = threading.Lock()
        # Replaced by tests that run the protocol in-process.
        self.exit_hook: Callable[[int], None] = lifetime.exit_process

    # -- Entry points from the reader ---------------------------------------------------------

    def handle_frame(self, item: Any) -> None:
        """Handle one framed input: a parsed JSON value, an `Unparsable` or an `Oversized`."""
        try:
            if isinstance(item, Oversized):
                self._oversized(item)
            elif isinstance(item, Unparsable):
                log.warning("%s", item.reason)
                self.reply_error(item.id, PARSE_ERROR, item.reason)
            else:
                self.handle_json(item)
        except Exception:  # Nothing a client sends may stop the server.
            log.exception("unexpected error while handling a message")

    def _oversized(self, item: Oversized) -> None:
        why = (f"the message of {item.length} bytes is over the limit of {MAX_MESSAGE_BYTES} bytes "
               "and was discarded")
        if item.id is not None:
            self.reply_error(item.id, INVALID_REQUEST, why)
        else:
            self.notify(types.WINDOW_LOG_MESSAGE, types.LogMessageParams(types.MessageType.Warning, f"dg-lsp: {why}"))

    def handle_json(self, data: Any) -> None:
        if not isinstance(data, dict):
            self.reply_error(None, INVALID_REQUEST, "a message must be a JSON object (batches are not used by LSP)")
            return
        msg_id = data.get("id")
        has_id = "id" in data and msg_id is not None
        method = data.get("method")
        if data.get("jsonrpc") != "2.0":
            self.reply_error(msg_id if _valid_id(msg_id) and "method" in data else None, INVALID_REQUEST,
                             "the message is not JSON-RPC 2.0 (\"jsonrpc\": \"2.0\" is missing)")
            return
        if has_id and not _valid_id(msg_id):
            if "method" in data:
                self.reply_error(None, INVALID_REQUEST, "a request id must be an integer or a string")
            return
        if "method" in data and not isinstance(method, str):
            self.reply_error(msg_id if has_id else None, INVALID_REQUEST, "\"method\" must be a string")
            return
        if method is None:
            self._response(data, msg_id if has_id else None)
            return
        if "params" in data and data["params"] is not None and not isinstance(data["params"], (dict, list)):
            if has_id:
                self.reply_error(msg_id, INVALID_PARAMS, "\"params\" must be an object or an array")
            return
        if method == types.EXIT:
            self._exit()
            return
        if not self._admit(method, msg_id, has_id):
            return
        cls = self.get_message_type(method)
        if cls is None and method not in self.fm.features and method not in self.fm.builtin_features:
            if has_id:
                self.reply_error(msg_id, METHOD_NOT_FOUND, f"method not found: '{method}'")
            elif not method.startswith("$/"):
                log.info("ignored the notification '%s', which this server does not handle", method)
            return
        if cls is None:
            data = {**data, "params": data.get("params")}
        if has_id:
            if cls is not None and "id" not in {a.name for a in cls.__attrs_attrs__}:
                self.reply_error(msg_id, INVALID_REQUEST, f"'{method}' is a notification; it cannot be sent as a request")
                return
            cls = cls or JsonRPCRequestMessage
        else:
            if cls is not None and "id" in {a.name for a in cls.__attrs_attrs__}:
                log.warning("'%s' sent as a notification, but it is a request; ignored", method)
                return
            cls = cls or JsonRPCNotification
        try:
            message = self._converter.structure(data, cls)
        except Exception as exc:
            detail = _describe(exc)
            if has_id:
                self.reply_error(msg_id, INVALID_PARAMS, f"invalid params for '{method}': {detail}")
            else:
                log.warning("ignored '%s' with invalid params: %s", method, detail)
            return
        self._dispatch(message)

    def _response(self, data: dict, msg_id) -> None:
        """A client's reply to one of our requests."""
        if msg_id is None:
            log.warning("ignored a message with neither a method nor an id")
            return
        try:
            if "error" in data:
                message = self._converter.structure(data, ResponseErrorMessage)
            else:
                cls = self._result_types.pop(msg_id, None) or JsonRPCResponseMessage
                message = self._converter.structure(data, cls)
        except Exception as exc:
            future = self._request_futures.pop(msg_id, None)
            if future is not None and not future.done():
                future.set_exception(ValueError(f"the client's reply was not valid: {_describe(exc)}"))
            log.warning("ignored an invalid reply to %r: %s", msg_id, _describe(exc))
            return
        self.handle_message(message)

    # -- Lifecycle ----------------------------------------------------------------------------

    def handle_message(self, message) -> None:
        """pygls' entry point for a structured message, with the lifecycle rules applied."""
        method = getattr(message, "method", None)
        if method is None:  # a response to one of our requests
            super().handle_message(message)
        elif method == types.EXIT:
            self._exit()
        elif self._admit(method, getattr(message, "id", None), getattr(message, "id", None) is not None):
            self._dispatch(message)

    def _admit(self, method: str, msg_id, is_request: bool) -> bool:
        """Apply the lifecycle rules; False when the message has been answered or dropped."""
        if not self._initialized:
            if is_request and method == types.INITIALIZE:
                return True
            if is_request:
                self.reply_error(msg_id, SERVER_NOT_INITIALIZED, f"'{method}' before 'initialize'")
            else:
                log.debug("dropped '%s' before initialize", method)
            return False
        if is_request and method == types.INITIALIZE:
            self.reply_error(msg_id, INVALID_REQUEST, "'initialize' was already received")
            return False
        if self._shutdown:
            if is_request:
                self.reply_error(msg_id, INVALID_REQUEST, f"'{method}' after 'shutdown': only 'exit' is accepted now")
            return False
        return True

    def _dispatch(self, message) -> None:
        if message.method == types.INITIALIZE:
            self._initialized = True
        super().handle_message(message)

    def _exit(self) -> None:
        code = 0 if self._shutdown else 1
        handler = self.fm.features.get(types.EXIT)
        if handler is not None:
            try:
                handler(None)
            except Exception:
                log.exception("the exit handler failed")
        self.exit_hook(code)

    def end_of_input(self) -> None:
        """stdin closed: the editor is gone or done; nothing more can arrive."""
        code = 0 if self._shutdown else 1
        log.info("end of input; exiting with %d", code)
        self.exit_hook(code)

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args):
        """pygls' shutdown, iterating over a copy of the in-flight requests while cancelling them."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    # -- Text synchronization -------------------------------------------------------------------
    # pygls keeps its own copy of every document (`self.workspace`) and updated it before calling
    # the server's handler; when that failed (didChange or didClose for a document that is not
    # open, a URI it cannot parse) the server's own handler never ran and the user got an
    # "Error in server" pop-up. The copy is now best effort; the server's handler always runs.

    def _mirror(self, update: Callable, *args) -> None:
        try:
            update(*args)
        except Exception as exc:
            log.debug("pygls' copy of the document was not updated: %r", exc)

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        self._mirror(self.workspace.put_text_document, params.text_document)
        if (user_handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield user_handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        for change in params.content_changes:
            self._mirror(self.workspace.update_text_document, params.text_document, change)
        if (user_handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield user_handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        self._mirror(self.workspace.remove_text_document, params.text_document.uri)
        if (user_handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield user_handler, (params,), None

    # -- Dispatch -----------------------------------------------------------------------------

    def _handle_notification(self, method_name: str, params: Any) -> None:
        known = method_name == types.CANCEL_REQUEST or method_name in self.fm.builtin_features or method_name in self.fm.features
        if not known:
            if not method_name.startswith("$/"):
                log.info("ignored the notification '%s', which this server does not handle", method_name)
            return
        super()._handle_notification(method_name, params)

    def _run_generator(self, future, *, gen, result_future) -> None:
        """pygls' generator runner, with the inner handler linked to the request's future.

        Cancelling the request cancels the inner handler (so the model job's token is cancelled),
        a cancelled inner handler cancels the request, and the inner future is forgotten once done.
        """
        if result_future.done():
            gen.close()
            return
        try:
            value = future.result() if future is not None else None
            handler, args, kwargs = gen.send(value)
        except StopIteration as result:
            result_future.set_result(result.value)
            return
        except (asyncio.CancelledError, FutureCancelledError):
            result_future.cancel()
            gen.close()
            return
        except Exception as exc:
            result_future.set_exception(exc)
            return
        inner_id = f"inner-{uuid.uuid4()}"
        try:
            self._execute_handler(
                inner_id, handler, args=args, kwargs=kwargs,
                callback=partial(self._inner_done, inner_id=inner_id, gen=gen, result_future=result_future),
            )
        except Exception as exc:
            result_future.set_exception(exc)
            return
        inner = self._request_futures.get(inner_id)
        if inner is not None:
            result_future.add_done_callback(lambda f: inner.cancel() if f.cancelled() and not inner.done() else None)

    def _execute_handler(self, msg_id, handler, callback, args=None, kwargs=None) -> None:
        """pygls' handler runner; a finished handler's future is then forgotten.

        pygls keeps the future of every generator, async and thread handler in `_request_futures`
        and removes it only for requests, in `_send_handler_result`: every notification handled
        by a generator (didOpen, didChange, didClose, ...) stayed there for good, with its params.
        """
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(partial(self._forget, msg_id))

    def _forget(self, msg_id, future) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]

    def _inner_done(self, future, *, inner_id: str, gen, result_future) -> None:
        self._request_futures.pop(inner_id, None)
        self._run_generator(future, gen=gen, result_future=result_future)

    # -- Sending ------------------------------------------------------------------------------

    def reply_error(self, msg_id, code: int, message: str) -> None:
        """Send an error reply; `msg_id` None sends `"id": null` (JSON-RPC's id for unknown ids)."""
        self._write({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def _send_data(self, data: Any) -> None:
        if not data:
            return
        try:
            body = json.dumps(data, default=self._serialize_message)
        except Exception as exc:
            log.exception("could not serialize a message")
            msg_id = getattr(data, "id", None)
            if msg_id is not None and not hasattr(data, "method"):
                self.reply_error(msg_id, INTERNAL_ERROR, f"the reply could not be serialized: {exc}")
            return
        self._write_text(body)

    def _write(self, data: dict) -> None:
        self._write_text(json.dumps(data))

    def _write_text(self, body: str) -> None:
        if self.writer is None:
            log.error("no transport to send a message on")
            return
        payload = body.encode("utf-8")
        frame = b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
        log.debug("sending %s", body[:500])
        with self._write_lock:
            self.writer.write(frame)


def _describe(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    try:
        from cattrs import transform_error

        messages = transform_error(cause)
        if messages:
            return "; ".join(messages[:5])
    except Exception:
        pass
    return f"{type(cause).__name__}: {cause}"[:500]


# --- Test faults ----------------------------------------------------------------------------------
