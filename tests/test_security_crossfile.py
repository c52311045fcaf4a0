"""Cross-file context only ever comes from documents inside the workspace folders.

`crossfile.inside` decides: `file` URIs on this machine only, `..` resolved, symbolic links
followed to where they really lead, and odd URIs (NUL bytes, broken hosts) refused rather than
raised on. The chunk selection of a real `DgServer` (in-process, no model) must then pick chunks
from inside documents only, whatever else is open.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lsprotocol import types

from dg_lsp.crossfile import inside, uri_path
from dg_lsp.features import common
from dg_lsp.server import DgServer


@pytest.fixture()
def layout(tmp_path):
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("secret_token_value = 1\n")
    (tmp_path / "ws-evil").mkdir()
    os.symlink(outside / "secret.py", ws / "link_out.py")
    os.symlink(outside, ws / "dir_out")
    (ws / "pkg" / "real.py").write_text("x = 1\n")
    os.symlink(ws / "pkg" / "real.py", ws / "link_in.py")
    os.symlink(ws / "loop_b", ws / "loop_a")
    os.symlink(ws / "loop_a", ws / "loop_b")
    return tmp_path, ws.resolve(), outside


def test_inside_accepts_files_in_the_folders(layout):
    _, ws, _ = layout
    assert inside((ws / "a.py").as_uri(), [ws])
    assert inside((ws / "pkg" / "new file.py").as_uri(), [ws])  # need not exist yet
    assert inside((ws / "link_in.py").as_uri(), [ws])  # a link that stays inside
    assert inside(ws.as_uri() + "/pkg/%72eal.py", [ws])  # percent-encoded letters


@pytest.mark.parametrize("make_uri", [
    lambda root, ws: (ws / ".." / "outside" / "secret.py").as_uri(),
    lambda root, ws: ws.as_uri() + "/pkg/../../outside/secret.py",
    lambda root, ws: ws.as_uri() + "/%2E%2E/outside/secret.py",
    lambda root, ws: (ws / "link_out.py").as_uri(),
    lambda root, ws: (ws / "dir_out" / "secret.py").as_uri(),
    lambda root, ws: (root / "ws-evil" / "a.py").as_uri(),  # shares the folder's name as a prefix
    lambda root, ws: "untitled:Untitled-1",
    lambda root, ws: "http://example.com" + str(ws / "a.py"),
    lambda root, ws: "vscode-remote://ssh" + str(ws / "a.py"),
    lambda root, ws: "file://otherhost" + str(ws / "a.py"),  # a file on another machine
    lambda root, ws: ws.as_uri() + "/a%00b.py",
    lambda root, ws: (ws / "loop_a" / "x.py").as_uri(),  # a symbolic link loop
    lambda root, ws: "file://[broken" + str(ws / "a.py"),
    lambda root, ws: "",
    lambda root, ws: "not a uri",
])
def test_inside_refuses_everything_else_without_raising(layout, make_uri):
    root, ws, _ = layout
    assert inside(make_uri(root, ws), [ws]) is False


def test_uri_path_is_for_local_file_uris_only():
    assert uri_path("file:///tmp/a%20b.py") == Path("/tmp/a b.py")
    assert uri_path("file://localhost/tmp/a.py") == Path("/tmp/a.py")
    for uri in ("untitled:x", "https://x/y", "file://host/tmp/a.py", "file://[x/a", "file:///a%00"):
        assert uri_path(uri) is None, uri


def test_chunk_selection_uses_only_workspace_documents(layout):
    root, ws, outside = layout
    server = DgServer()
    server.folders = [ws]
    server.host.engine = object()  # job_at only checks that a model is there
    shared = "def use():\n    return secret_token_value + helper_value\n"
    current = (ws / "main.py").as_uri()
    allowed = (ws / "pkg" / "helper.py").as_uri()
    refused = [
        (outside / "secret.py").as_uri(),
        ws.as_uri() + "/../outside/other.py",
        (ws / "link_out.py").as_uri(),
        (ws / "dir_out" / "secret.py").as_uri(),
        (root / "ws-evil" / "a.py").as_uri(),
        "untitled:Untitled-2",
        "https://example.com/x.py",
        ws.as_uri() + "/bad%00name.py",
    ]
    documents = [(current, shared), (allowed, "helper_value = 2  # from the allowed file\n")]
    documents += [(uri, f"secret_token_value = 'leaked from {uri}'\n") for uri in refused]
    for version, (uri, text) in enumerate(documents, start=1):
        server.documents.open(types.TextDocumentItem(uri, "python", version, text))
    snapshot = server.documents.snapshot(current)
    job = common.job_at(server, snapshot, len(shared), len(shared), "inline")
    assert job is not None and job.chunks, "the allowed document should have been picked"
    context = "".join(job.chunks)
    assert "from the allowed file" in context
    assert "leaked" not in context
    # A document outside the workspace gets no cross-file context at all.
    for uri in refused[:2]:
        job = common.job_at(server, server.documents.snapshot(uri), 0, 0, "inline")
        assert job.chunks == ()
