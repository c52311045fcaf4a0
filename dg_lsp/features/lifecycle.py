"""initialize / initialized / shutdown / exit.

`initialize` must answer at once: it reads the client's options, starts the model load on its own
thread and returns. pygls builds the capabilities from the routing table and negotiates the
position encoding (UTF-16 unless the client prefers UTF-8 or UTF-32).
"""

from __future__ import annotations

from lsprotocol import types


def initialize(server, params: types.InitializeParams) -> None:
    server.documents.encoding = str(getattr(server.workspace.position_encoding, "value", server.workspace.position_encoding) or "utf-16")
    server.set_workspace_folders(params)
    options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
    server.apply_settings(options, trusted=True, source="initializationOptions", load=False)
    server.watch_parent(params.process_id)


def initialized(server, params: types.InitializedParams) -> None:
    server.rebuild_settings(load=False)
    server.start_model()
    server.start_config_watcher()


def shutdown(server, params: None) -> None:
    server.scheduler.shutdown()


def exit(server, params: None) -> None:
    server.release()
