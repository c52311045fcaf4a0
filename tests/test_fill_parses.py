"""The request path reads the document's incrementally parsed tree instead of parsing the file.

Parsing a file of a couple of thousand lines from scratch costs several milliseconds on every
keystroke, so an inline request must take the tree from its snapshot: no parse of the document
when the snapshot has one, at most one when it does not.  The snapshot's tree must also stay the
snapshot's: edits that arrive while the worker reads it may not change it.
"""

from __future__ import annotations

import dataclasses

import pytest
from lsprotocol import types

from dg_lsp.documents import DocumentStore
from dg_lsp.fill import FillJob, run_fill
from dg_lsp.scheduler import CancelToken
from dg_lsp.settings import Settings
from dg_lsp.syntax import context, tree
from dg_lsp.syntax.fill_end import SALVAGE_CUTS
from dg_lsp.syntax_trees import make_tree

URI = "file:///w/module.py"
FUNCTION = "def f{0}(x):\n    if x:\n        return x + {0}\n    return None\n\n\n"
TEXT = "import os\n\n\n" + "".join(FUNCTION.format(i) for i in range(40)) + "def g(y):\n    total = y\n"


@pytest.fixture()
def document_parses(monkeypatch):
    """Counts from-scratch parses of the whole document through the syntax layer's `parse`."""
    counts = {"document": 0, "all": 0, "texts": []}
    original = tree.parse

    def counting(text, spec):
        counts["all"] += 1
        counts["texts"].append(text)
        counts["document"] += text == TEXT
        return original(text, spec)

    monkeypatch.setattr(tree, "parse", counting)
    monkeypatch.setattr(context, "parse", counting)
    tree.forget_error_counts()
    return counts


def _snapshot():
    store = DocumentStore(make_tree)
    store.open(types.TextDocumentItem(URI, "python", 1, TEXT))
    return store, store.snapshot(URI)


def _inline(snapshot) -> FillJob:
    settings = Settings().update({"maxSteps": 2})[0]
    return FillJob(snapshot, len(TEXT), len(TEXT), "inline", settings)


def test_an_inline_request_with_the_snapshot_tree_parses_no_document(engine, document_parses):
    _, snapshot = _snapshot()
    assert snapshot.tree is not None
    run_fill(engine, _inline(snapshot), CancelToken())
    assert document_parses["document"] == 0


def test_an_inline_request_without_a_tree_parses_the_document_once(engine, document_parses):
    _, snapshot = _snapshot()
    run_fill(engine, _inline(dataclasses.replace(snapshot, tree=None)), CancelToken())
    assert document_parses["document"] == 1


def test_ranking_parses_each_candidate_once_and_never_the_context_alone(engine, document_parses):
    # The document fits the budget, so the context without a fill is the snapshot's text, whose
    # errors its tree shows; each candidate with the fill in it is parsed once, shared by
    # post-processing and ranking. One that breaks the file costs the salvage one more parse and
    # at most SALVAGE_CUTS incremental reparses (which do not go through `tree.parse`).
    _, snapshot = _snapshot()
    job = dataclasses.replace(_inline(snapshot), n=3, settings=_inline(snapshot).settings.update({"syntaxRepair": False})[0])
    run_fill(engine, job, CancelToken())
    assert document_parses["document"] == 0
    assert document_parses["all"] <= job.n * (2 + SALVAGE_CUTS)
    assert max(document_parses["texts"].count(t) for t in document_parses["texts"]) == 1


def test_later_edits_do_not_change_a_snapshot_tree(engine):
    store, snapshot = _snapshot()
    before = (snapshot.tree.root_node.end_byte, str(snapshot.tree.root_node))
    end = types.Position(TEXT.count("\n"), 0)
    store.change(URI, 2, [types.TextDocumentContentChangePartial(range=types.Range(end, end), text="    return (\n")])
    run_fill(engine, _inline(snapshot), CancelToken())
    assert (snapshot.tree.root_node.end_byte, str(snapshot.tree.root_node)) == before
    assert store.snapshot(URI).tree.root_node.end_byte > before[0]
