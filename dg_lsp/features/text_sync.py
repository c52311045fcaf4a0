"""didOpen / didChange / didSave / didClose: keep the document store in step with the editor.

These run on the event loop, in order, before any later request reads the document: a request
must always see every edit the client sent before it.
"""

from __future__ import annotations

from lsprotocol import types


def did_open(server, params: types.DidOpenTextDocumentParams) -> None:
    server.documents.open(params.text_document)
    server.history.open(params.text_document.uri, params.text_document.text)
    server.chunks.reopened(params.text_document.uri)


def did_change(server, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    edits = server.documents.change(uri, params.text_document.version, list(params.content_changes))
    server.on_document_changed(uri, edits)


def did_save(server, params: types.DidSaveTextDocumentParams) -> None:
    server.log_debug(f"saved {params.text_document.uri}")


def did_close(server, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    server.chunks.retire(server.documents.snapshot(uri))
    server.documents.close(uri)
    server.confidence.clear(uri)
    server.history.close(uri)
    server.next_edits.closed(uri)
