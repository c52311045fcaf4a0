"""Documents under random edits, in every position encoding, and documents the model must not see.

The property tests drive `DocumentStore` + `Codec` with random incremental edit scripts over text
full of emoji (astral, with modifiers and joiners), CJK, combining marks, every LSP line break and
lookalikes that are not line breaks, and compare with a replay on a plain string through an
independent reference conversion. Positions are drawn past the ends of lines and of the document
(stale positions) and in the middle of characters: they must be clamped, never raised on.
Over the wire, one server in UTF-8 checks the same with `dg.documentHash`, and that documents over
1 MB or with NUL bytes get empty results and a log line, never an error.
"""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types

from dg_lsp.convert import Codec
from dg_lsp.documents import MAX_DOCUMENT_CHARS, DocumentStore
from raw_client import RawServer, inline_params, reliability_env, tiny_model_dir

ENCODINGS = ("utf-8", "utf-16", "utf-32")
PIECES = [
    "a", "Z", "_", " ", "\t", "(", "\n", "\r\n", "\r", "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "日本", "語", "e\u0301",
    "a\u0308\u0323", "\u200d", "\u2028", "\x85", "\x0c", "é", "ß", "\U0010ffff", "\ud800",
]
text_st = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)
LINE_BREAK = re.compile(r"\r\n|\r|\n")
UNIT_BYTES = {"utf-8": 1, "utf-16": 2, "utf-32": 4}
CODECS = {"utf-8": "utf-8", "utf-16": "utf-16-le", "utf-32": "utf-32-le"}


def width(ch: str, encoding: str) -> int:
    return len(ch.encode(CODECS[encoding], "surrogatepass")) // UNIT_BYTES[encoding]


def lines(text: str) -> list[tuple[int, int]]:
    """(start, end of content) of each line, splitting only at LSP line breaks."""
    out, start = [], 0
    for m in LINE_BREAK.finditer(text):
        out.append((start, m.start()))
        start = m.end()
    out.append((start, len(text)))
    return out


def reference_offset(text: str, line: int, character: int, encoding: str) -> int:
    spans = lines(text)
    if line >= len(spans):
        return len(text)
    start, end = spans[line]
    used = 0
    for i in range(start, end):
        w = width(text[i], encoding)
        if used + w > character:
            return i
        used += w
    return end


def draw_position(data, text: str, encoding: str) -> types.Position:
    spans = lines(text)
    line = data.draw(st.integers(0, len(spans) + 2), label="line")
    longest = max(sum(width(c, encoding) for c in text[a:b]) for a, b in spans)
    character = data.draw(st.one_of(st.integers(0, longest + 3), st.integers(0, 2**31 - 1)), label="character")
    return types.Position(line, character)


def change(rng: types.Range, new: str) -> types.TextDocumentContentChangePartial:
    return types.TextDocumentContentChangePartial(range=rng, text=new)


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), initial=text_st)
def test_incremental_edits_equal_a_full_text_replay(encoding, data, initial):
    store = DocumentStore()
    store.encoding = encoding
    uri = "file:///ws/doc.py"
    store.open(types.TextDocumentItem(uri, "python", 1, initial))
    expected = initial
    for version in range(2, data.draw(st.integers(2, 14), label="edits")):
        batch = []
        for _ in range(data.draw(st.integers(1, 3), label="changes in one didChange")):
            if data.draw(st.integers(0, 9), label="whole") == 0:
                new = data.draw(text_st, label="whole text")
                batch.append(types.TextDocumentContentChangeWholeDocument(text=new))
                expected = new
                continue
            a, b = draw_position(data, expected, encoding), draw_position(data, expected, encoding)
            new = data.draw(text_st, label="inserted")
            start = reference_offset(expected, a.line, a.character, encoding)
            end = reference_offset(expected, b.line, b.character, encoding)
            start, end = min(start, end), max(start, end)
            batch.append(change(types.Range(a, b), new))
            expected = expected[:start] + new + expected[end:]
        store.change(uri, version, batch)
        snapshot = store.snapshot(uri)
        assert snapshot.text == expected
        assert snapshot.version == version


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=80, deadline=None)
@given(data=st.data(), text=text_st)
def test_positions_are_clamped_and_round_trip(encoding, data, text):
    codec = Codec(text, encoding)
    for _ in range(5):
        p = draw_position(data, text, encoding)
        offset = codec.offset(p)
        assert offset == reference_offset(text, p.line, p.character, encoding)
        back = codec.position(offset)
        assert (back.line, back.character) <= (p.line, p.character)  # clamped, never past the input
        assert codec.offset(back) == offset
    for offset in range(len(text) + 1):
        if 0 < offset < len(text) and text[offset - 1 : offset + 1] == "\r\n":
            continue  # between \r and \n there is no position
        assert codec.offset(codec.position(offset)) == offset
    for offset in (-5, len(text) + 5):
        assert 0 <= codec.offset(codec.position(offset)) <= len(text)


def test_changes_to_unknown_documents_and_odd_changes_never_raise():
    store = DocumentStore()
    store.change("file:///not-open.py", 3, [change(types.Range(types.Position(0, 0), types.Position(9, 9)), "x")])
    store.open(types.TextDocumentItem("file:///a.py", "python", 1, "ab\ncd"))
    far = types.Position(2**31 - 1, 2**31 - 1)
    store.change("file:///a.py", 2, [change(types.Range(far, types.Position(0, 1)), "!")])  # reversed range
    assert store.snapshot("file:///a.py").text == "a!"
    store.change("file:///a.py", 3, [types.TextDocumentContentChangePartial(range=None, text="whole")])
    assert store.snapshot("file:///a.py").text == "whole"


# --- Over the wire, in UTF-8 -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    srv = RawServer(reliability_env())
    srv.root = root
    result = srv.initialize({"model": str(tiny_model_dir()), "maxSteps": 2, "canvasLength": 8}, root=root,
                            encodings=["utf-8"])
    assert result["capabilities"]["positionEncoding"] == "utf-8"
    assert srv.wait_ready()["state"] == "ready", srv.stderr()
    yield srv
    assert srv.alive(), srv.stderr()
    srv.close()


def test_utf8_edits_over_the_wire_match_the_client_text(server):
    uri = (server.root / "wide.py").as_uri()
    text = "s = '😀 日本 é'\n"
    server.open(uri, text)
    # (line, characters before the edit, characters removed, inserted text)
    script = [(0, 5, 0, "👍🏽"), (0, 9, 2, "語\n"), (1, 0, 0, "e\u0301 = 1"), (0, 0, 1, "t"), (2, 0, 0, "# 🇫🇷\n"),
              (1, 1, 3, "")]
    for version, (line, before, removed, new) in enumerate(script, start=2):
        line_start = sum(len(l) + 1 for l in text.split("\n")[:line])
        content = text.split("\n")[line]
        col = len(content[:before].encode("utf-8"))
        end_col = len(content[: before + removed].encode("utf-8"))
        start = line_start + before
        text = text[:start] + new + text[start + removed :]
        server.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": line, "character": col},
                                          "end": {"line": line, "character": end_col}}, "text": new}]})
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert server.command("dg.documentHash", {"uri": uri}) == {"version": len(script) + 1, "sha256": digest}
    assert server.command("dg.status")["positionEncoding"] == "utf-8"


@pytest.mark.parametrize("name, text, why", [
    ("huge.py", "x = 1\n" * (MAX_DOCUMENT_CHARS // 6 + 20000), "size limit"),
    ("binary.py", "def f():\n    return b'\x00\x01'\n", "binary"),
])
def test_large_and_binary_documents_get_empty_results_and_a_log_line(server, name, text, why):
    uri = (server.root / name).as_uri()
    server.open(uri, text)
    position = {"line": 1, "character": 4}
    inline = server.result("textDocument/inlineCompletion", inline_params(uri, 1, 4))
    assert inline == {"items": []}
    completion = server.result("textDocument/completion", {"textDocument": {"uri": uri}, "position": position})
    assert completion["items"] == []
    actions = server.result("textDocument/codeAction", {"textDocument": {"uri": uri},
                                                        "range": {"start": position, "end": position},
                                                        "context": {"diagnostics": []}})
    assert not actions
    logged = server.wait_for(lambda m: m.get("method") == "window/logMessage" and name in m["params"]["message"], 10)
    assert logged and why in logged["params"]["message"]
