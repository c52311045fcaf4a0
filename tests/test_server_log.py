"""What the server's log says about cancelled work: nothing an editor would show as an error.

A superseded ghost-text request and a job whose handler the client cancelled are the normal
case while typing; neither may leave a traceback or an asyncio "exception was never retrieved"
error in the log (`dg_lsp.logs`, `dg_lsp.scheduler`)."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading

import pytest
from pygls.exceptions import JsonRpcInternalError, JsonRpcRequestCancelled

from dg_engine import Cancelled
from dg_lsp.logs import JSON_RPC_LOGGER, CancelledRequests
from dg_lsp.scheduler import Scheduler


def record(exc: Exception) -> logging.LogRecord:
    try:
        raise exc
    except Exception:
        import sys

        info = sys.exc_info()
    return logging.LogRecord(JSON_RPC_LOGGER, logging.ERROR, __file__, 1, 'Exception occurred for message "%s"',
                             ("5",), info)


@pytest.fixture()
def rpc_level():
    """Sets the pygls logger's level (setLevel, which also clears the logger's cache); restored after."""
    rpc = logging.getLogger(JSON_RPC_LOGGER)
    before = rpc.level
    yield rpc.setLevel
    rpc.setLevel(before)


def test_a_cancelled_request_is_one_debug_line_or_nothing(rpc_level):
    rpc_level(logging.INFO)
    assert not CancelledRequests().filter(record(JsonRpcRequestCancelled("superseded by a newer request")))
    rpc_level(logging.DEBUG)
    kept = record(JsonRpcRequestCancelled("superseded by a newer request"))
    assert CancelledRequests().filter(kept)
    assert kept.levelno == logging.DEBUG and kept.exc_info is None
    assert kept.getMessage() == 'Exception occurred for message "5": request cancelled (superseded by a newer request)'


def test_a_real_error_keeps_its_level_and_traceback(rpc_level):
    rpc_level(logging.INFO)
    error = record(JsonRpcInternalError("boom"))
    assert CancelledRequests().filter(error)
    assert error.levelno == logging.ERROR and error.exc_info is not None


def test_a_job_whose_handler_was_cancelled_ends_without_an_unread_exception(caplog):
    started, release = threading.Event(), threading.Event()

    def job(token):
        started.set()
        release.wait(5)
        if token.is_cancelled():
            raise Cancelled(token.reason)
        return "done"

    async def main():
        scheduler = Scheduler()
        task = asyncio.ensure_future(scheduler.run(job))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        task.cancel()  # the client's $/cancelRequest
        try:
            await task
        except asyncio.CancelledError:
            pass
        release.set()
        await asyncio.sleep(0.2)  # the job ends on the worker with Cancelled
        scheduler.shutdown()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(main())
        gc.collect()
    assert "never retrieved" not in caplog.text
