"""workspace/didChangeConfiguration: new settings apply to every later request.

Settings pushed by the editor come from the user's settings (editors keep machine-scoped keys
such as the model path out of workspace settings), so they are trusted; a changed model, device,
dtype or quantization reloads the model in the background while the old one keeps serving.
"""

from __future__ import annotations

from lsprotocol import types


def did_change_configuration(server, params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings
    if isinstance(settings, dict):
        section = settings.get("dgLsp", settings.get("dg_lsp", settings))
        if isinstance(section, dict):
            server.apply_settings(section, trusted=True, source="didChangeConfiguration", load=True)
