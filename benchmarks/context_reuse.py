"""How long the request path spends on tree-sitter context, with and without the document's tree.

Every inline request starts with `dg_lsp.fill.context_for`. The document store keeps an
incrementally parsed tree per document and hands a copy to each snapshot, so the request should
not parse the file again. This replays cursor positions in a held-out standard-library module of
one to two thousand lines through the store and times `context_for` on snapshots that carry the
tree and on snapshots that do not (what every request paid before the tree was passed on),
counting the from-scratch parses of the whole document each time. At each position a half-typed
line (`result = compute(`) is inserted first, as while typing: the file then has a syntax error,
which is the state the request path usually sees and the one that makes parsing slow.

    python -m benchmarks.context_reuse [--module difflib.py] [--requests 60]
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import replace

from lsprotocol import types

from . import common


def _positions(text: str, count: int, seed: int) -> list[int]:
    """Ends of randomly chosen non-blank lines: where a user typing would ask for a completion."""
    ends = [i for i, char in enumerate(text) if char == "\n" and i > 0 and text[i - 1].strip()]
    return sorted(random.Random(seed).sample(ends, min(count, len(ends))))


def _indent_at(text: str, position: int) -> str:
    """The indentation of the line that ends at `position`."""
    line = text[text.rfind("\n", 0, position) + 1 : position]
    return line[: len(line) - len(line.lstrip())]


def _insert(text: str, position: int, new: str) -> types.TextDocumentContentChangePartial:
    """An LSP change inserting `new` at a str offset (UTF-16 positions; the module is ASCII here)."""
    from benchmarks.lspclient import utf16_position

    at = utf16_position(text, position)
    return types.TextDocumentContentChangePartial(range=types.Range(at, at), text=new)


class _ParseCounter:
    """Counts from-scratch parses of one text by wrapping the syntax layer's `parse`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.document_parses = 0

    def __enter__(self):
        from dg_lsp.syntax import context, tree

        self._modules = (context, tree)
        self._original = tree.parse

        def counting(text, spec):
            self.document_parses += text == self.text
            return self._original(text, spec)

        for module in self._modules:
            module.parse = counting
        return self

    def __exit__(self, *exc):
        for module in self._modules:
            module.parse = self._original
        return False


def measure(module: str, requests: int, seed: int = 0) -> dict:
    from dg_engine.train.corpus import read_sources
    from dg_lsp.documents import DocumentStore
    from dg_lsp.fill import FillJob, context_for
    from dg_lsp.settings import Settings
    from dg_lsp.syntax_trees import make_tree

    source = read_sources([module], None)[0]
    store = DocumentStore(make_tree)
    uri = f"file:///bench/{module.replace('/', '_')}"
    store.open(types.TextDocumentItem(uri, "python", 1, source.text))
    settings = Settings()
    result = {"module": module, "lines": source.text.count("\n"), "chars": len(source.text), "requests": requests}
    times: dict[str, list[float]] = {"with_tree": [], "without_tree": []}
    parses = dict.fromkeys(times, 0)
    for version, position in enumerate(_positions(source.text, requests, seed), 2):
        typed = "\n" + _indent_at(source.text, position) + "result = compute("
        store.change(uri, version, [_insert(source.text, position, typed)])
        snapshot = store.snapshot(uri)
        cursor = position + len(typed)
        for label, snap in (("with_tree", snapshot), ("without_tree", replace(snapshot, tree=None))):
            with _ParseCounter(snap.text) as counter:
                started = time.perf_counter()
                context_for(FillJob(snap, cursor, cursor, "inline", settings))
                times[label].append((time.perf_counter() - started) * 1000)
            parses[label] += counter.document_parses
        store.change(uri, version, [types.TextDocumentContentChangeWholeDocument(text=source.text)])
    for label, values in times.items():
        result[label] = {"context_ms": common.summary(values), "document_parses_per_request": parses[label] / len(values)}
    return result


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.context_reuse", description=__doc__.splitlines()[0])
    p.add_argument("--module", default="difflib.py", help="a held-out module (dg_engine.train.corpus.HELD_OUT)")
    p.add_argument("--requests", type=int, default=60)
    p.add_argument("--label", default="", help="recorded in the JSON (e.g. before/after a change)")
    args = p.parse_args(argv)
    payload = {"label": args.label, **measure(args.module, args.requests)}
    for key in ("with_tree", "without_tree"):
        print(key, payload[key])
    print(f"wrote {common.write('context_reuse', payload)}")
    return payload


if __name__ == "__main__":
    main()
