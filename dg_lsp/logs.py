"""The server process's logging: `DG_LSP_LOG` levels, and the noise kept out of the log.

Everything the server logs goes to stderr, which editors show as the server's output (VS Code's
"DG" channel, Neovim's LSP log). A log full of tracebacks for things that are not errors hides
the ones that are, so the normal case of a superseded request is one DEBUG line here.
"""

from __future__ import annotations

import logging
import sys

from pygls.exceptions import JsonRpcRequestCancelled

log = logging.getLogger("dg_lsp")
# The logger pygls reports a request's exception on.
JSON_RPC_LOGGER = "pygls.protocol.json_rpc"


class CancelledRequests(logging.Filter):
    """pygls logs every request answered with RequestCancelled as an exception, traceback and all.
    Ghost text asked for at one keystroke and superseded by the next ends that way many times a
    minute, so such records become a single DEBUG line (dropped below DEBUG)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, JsonRpcRequestCancelled):
            return True
        if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
            return False
        record.msg, record.args = f"{record.getMessage()}: request cancelled ({exc})", ()
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.exc_info, record.exc_text = None, None
        return True


def configure_logging(spec: str) -> None:
    """`DG_LSP_LOG`: a level ("INFO"), optionally followed by per-logger levels
    ("INFO,dg_lsp.protocol=DEBUG" logs what the server sends without pygls' own debug output).
    An unknown level is reported and INFO used."""
    root, *rest = [part.strip() for part in spec.split(",") if part.strip()] or ["INFO"]
    levels = logging.getLevelNamesMapping()
    logging.basicConfig(level=levels.get(root.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if root.upper() not in levels:
        log.warning("DG_LSP_LOG: unknown level %r; using INFO", root)
    for part in rest:
        name, _, level = part.partition("=")
        if level.upper() in levels:
            logging.getLogger(name).setLevel(levels[level.upper()])
        else:
            log.warning("DG_LSP_LOG: unknown level %r for %r; ignored", level, name)
    rpc = logging.getLogger(JSON_RPC_LOGGER)
    if not any(isinstance(f, CancelledRequests) for f in rpc.filters):
        rpc.addFilter(CancelledRequests())
