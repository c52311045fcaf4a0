"""textDocument/inlayHint: the model's confidence next to text it was unsure of.

When the confidence display includes inlay hints, each low-confidence span that landed in the
document gets a small hint at its end with the model's probability for it.
"""

from __future__ import annotations

from lsprotocol import types


def inlay_hints(server, params: types.InlayHintParams) -> list[types.InlayHint]:
    if server.settings.confidence_display not in ("inlayHints", "both"):
        return []
    snapshot = server.documents.snapshot(params.text_document.uri)
    if snapshot is None:
        return []
    codec = snapshot.codec(server.documents.encoding)
    start, end = codec.offsets(params.range)
    return [
        types.InlayHint(
            position=codec.position(span.end),
            label=f"{span.confidence:.0%}?",
            padding_left=True,
            tooltip=f"dg-lsp was only {span.confidence:.0%} confident of this text",
        )
        for span in server.confidence.spans(snapshot.uri)
        if start <= span.end <= end
    ]
