"""Work-done progress for slow requests, only when the client can show it.

Code actions, rewrites and model loading take long enough that an editor should show a spinner.
The LSP asks the server to create a token first (`window/workDoneProgress/create`); clients that
did not declare `window.workDoneProgress` get nothing, and a failed create is not an error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import uuid

from lsprotocol import types

log = logging.getLogger(__name__)


def supported(server) -> bool:
    caps = server.client_capabilities
    return bool(caps and caps.window and caps.window.work_done_progress)


@contextlib.asynccontextmanager
async def progress(server, title: str, message: str = ""):
    """Begin/end a progress report around a block; yields the token or None."""
    token = None
    if supported(server):
        token = f"dg-{uuid.uuid4()}"
        try:
            created = server.work_done_progress.create(token)
            if isinstance(created, concurrent.futures.Future):
                created = asyncio.wrap_future(created)
            await asyncio.wait_for(created, timeout=2.0)
            server.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, message=message, cancellable=False))
        except Exception:  # The client may refuse; progress is a courtesy, never a failure.
            log.debug("client refused a progress token", exc_info=True)
            token = None
    try:
        yield token
    finally:
        if token is not None:
            server.work_done_progress.end(token, types.WorkDoneProgressEnd())
