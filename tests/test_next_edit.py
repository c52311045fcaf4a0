"""Next-edit suggestions without a model: the edit history, the windows, and the gates.

`suggest` runs here against a scripted engine that rewrites the seed as told and reports chosen
confidences, so each gate (confidence, undo, the user's own lines) is checked on its own."""

from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

from dg_engine import NeverCancelled
from dg_engine.nextedit import edit_chunks, hunk_text, line_hunks, split_window, window_lines
from dg_lsp.documents import Snapshot
from dg_lsp.edit_history import EditHistory, pair
from dg_lsp.edits import apply_edits
from dg_lsp.next_edit import NextEditJob, anchors, suggest
from dg_lsp.settings import Settings

SRC = '''class Shape:
    def area(self, w, h):
        total = w * h
        return total
'''


def type_into(history: EditHistory, uri: str, text: str, at: int, typed: str) -> str:
    """Type `typed` at offset `at` one character per change, as an editor sends it."""
    for k, ch in enumerate(typed):
        text = text[: at + k] + ch + text[at + k :]
        history.changed(uri, text, [(at + k, at + k, 1)])
    return text


def replace(history: EditHistory, uri: str, text: str, old: str, new: str) -> str:
    at = text.index(old)
    text = text[:at] + new + text[at + len(old) :]
    history.changed(uri, text, [(at, at + len(old), len(new))])
    return text


def test_keystrokes_on_one_line_make_one_edit_and_an_edit_elsewhere_starts_another():
    h = EditHistory()
    h.open("u", SRC)
    text = type_into(h, "u", SRC, SRC.index("w, h") + 1, "idth")
    [hunk] = h.recent("u")
    assert hunk.before == ("    def area(self, w, h):",) and hunk.after == ("    def area(self, width, h):",)
    text = replace(h, "u", text, "return total", "return total + 0")
    first, second = h.recent("u")
    assert first == hunk and second.after == ("        return total + 0",)
    assert hunk_text(first) == "@@ -2 +2 @@\n-    def area(self, w, h):\n+    def area(self, width, h):\n"


def test_an_undo_is_remembered_and_leaves_the_history():
    h = EditHistory()
    h.open("u", SRC)
    edited = replace(h, "u", SRC, "total = w * h", "total = w * h * 2")
    elsewhere = replace(h, "u", edited, "class Shape:", "class Shape(object):")
    undone = replace(h, "u", elsewhere, "class Shape(object):", "class Shape:")  # the editor's undo
    assert undone == edited
    assert pair(("class Shape:",), ("class Shape(object):",)) in h.undone("u")
    assert all("object" not in line for hk in h.recent("u") for line in hk.after)


def test_windows_follow_the_latest_edit_then_what_it_implies():
    far = SRC + "\n" * 30 + "print(Shape().area(w=1, h=2))\nw = 3\n"
    h = EditHistory()
    h.open("u", far)
    text = type_into(h, "u", far, far.index("w, h") + 1, "idth")
    found = anchors(text, tuple(h.recent("u")), 1)
    assert found[0] == 1 and text.splitlines()[found[1]] == "print(Shape().area(w=1, h=2))"
    imports = "import os\n\n\ndef f():\n    return 1\n"
    h.open("i", imports)
    text = replace(h, "i", imports, "return 1", "return json.dumps(1)")
    assert anchors(text, tuple(h.recent("i")), 4) == [4, 0]  # `json` is defined nowhere: the imports


class ScriptedEngine:
    """Rewrites the seed with `rewrite` and gives every token written `confidence`."""

    def __init__(self, rewrite, confidence: float):
        self.rewrite, self.confidence, self.requests = rewrite, confidence, []

    def fill(self, request, cancel=None):
        self.requests.append(request)
        text = self.rewrite(request.seed_text)
        spans = [m.span() for m in re.finditer(r"\S+|\s+", text)]
        cand = SimpleNamespace(text=text, token_offsets=spans, confidences=[self.confidence] * len(spans))
        return SimpleNamespace(candidates=[cand])


def _job(text: str, h: EditHistory, uri: str = "u", **settings) -> NextEditJob:
    s = dataclasses.replace(Settings(), **settings)
    return NextEditJob(Snapshot(uri, 9, "python", text), 0, tuple(h.recent(uri)), h.undone(uri), s)


def _renamed():
    h = EditHistory()
    h.open("u", SRC)
    return type_into(h, "u", SRC, SRC.index("w, h") + 1, "idth"), h


def keep(seed: str) -> str:
    return seed


def test_an_implied_edit_the_model_keeps_becomes_a_minimal_edit_in_the_document():
    text, h = _renamed()  # `w` became `width` in the signature
    engine = ScriptedEngine(keep, 0.9)
    s = suggest(engine, _job(text, h), NeverCancelled())
    assert s is not None and s.version == 9 and s.confidence == 0.9
    assert [(text[a:b], new) for a, b, new, _ in s.edits] == [("w", "width")]
    assert "total = width * h" in apply_edits(text, [e[:3] for e in s.edits])
    # The prompt carries the edit as a hunk; the seed is the window around it, the use renamed.
    request = engine.requests[0]
    assert request.chunks == edit_chunks(h.recent("u"))
    window = split_window(text, window_lines(len(text.splitlines()), 1))[1]
    assert request.seed_text == window.replace("total = w * h", "total = width * h")


def test_an_implied_edit_the_model_rewrites_is_not_shown():
    text, h = _renamed()
    back = ScriptedEngine(lambda seed: seed.replace("= width *", "= w *"), 0.99)  # it disagrees
    assert suggest(back, _job(text, h), NeverCancelled()) is None
    other = ScriptedEngine(lambda seed: seed.replace("= width *", "= wide *"), 0.99)
    assert suggest(other, _job(text, h), NeverCancelled()) is None


def test_an_unsure_rewrite_is_not_shown():
    text, h = _renamed()
    engine = ScriptedEngine(keep, 0.3)
    assert suggest(engine, _job(text, h), NeverCancelled()) is None
    assert suggest(engine, _job(text, h, next_edit_min_confidence=0.2), NeverCancelled()) is not None


def test_what_the_user_just_typed_is_never_rewritten():
    text, h = _renamed()
    engine = ScriptedEngine(lambda seed: seed.replace("width", "w"), 0.99)  # undo the user's rename
    assert suggest(engine, _job(text, h, next_edit_only_implied=False), NeverCancelled()) is None


def test_a_change_the_user_undid_is_never_suggested_again():
    h = EditHistory()
    h.open("u", SRC)
    text = replace(h, "u", SRC, "return total", "return total * 2")
    text = replace(h, "u", text, "total = w * h", "total = w * h * 2")
    text = replace(h, "u", text, "total = w * h * 2", "total = w * h")  # undone
    free = {"next_edit_only_implied": False}
    engine = ScriptedEngine(lambda seed: seed.replace("total = w * h\n", "total = w * h * 2\n"), 0.99)
    assert suggest(engine, _job(text, h, **free), NeverCancelled()) is None
    other = ScriptedEngine(lambda seed: seed.replace("total = w * h\n", "total = w * h / 2\n"), 0.99)
    assert suggest(other, _job(text, h, **free), NeverCancelled()) is not None


def test_only_edits_that_follow_from_the_latest_edit_are_shown():
    text, h = _renamed()
    # The model's own change beside the implied one is not shown; the implied one it kept is.
    mixed = ScriptedEngine(lambda seed: seed.replace("return total", "return total + 1"), 0.99)
    s = suggest(mixed, _job(text, h), NeverCancelled())
    assert [(text[a:b], new) for a, b, new, _ in s.edits] == [("w", "width")]
    s = suggest(mixed, _job(text, h, next_edit_only_implied=False), NeverCancelled())  # both, when asked
    after = apply_edits(text, [e[:3] for e in s.edits])
    assert "total = width * h" in after and "return total + 1" in after
    # An edit that implies nothing: the model's rewrite is shown only when the user asks for it.
    h.open("o", SRC)
    text = replace(h, "o", SRC, "total = w * h", "total = w + h")
    unrelated = ScriptedEngine(lambda seed: seed.replace("return total", "return total + 0"), 0.99)
    assert suggest(unrelated, _job(text, h, uri="o"), NeverCancelled()) is None
    assert unrelated.requests == []  # and the model is not even asked
    assert suggest(unrelated, _job(text, h, uri="o", next_edit_only_implied=False), NeverCancelled()) is not None
    # A parameter removed: the argument it took goes from a call.
    src = "def f(a, b):\n    return a\n\n\nprint(f(1, 2))\n"
    h.open("d", src)
    text = replace(h, "d", src, "def f(a, b):", "def f(a):")
    s = suggest(ScriptedEngine(keep, 0.99), _job(text, h, uri="d"), NeverCancelled())
    assert s is not None and apply_edits(text, [e[:3] for e in s.edits]).endswith("print(f(1))\n")


def test_a_second_window_is_tried_where_the_edit_implies_a_change():
    far = "w = 1\n" + "\n" * 30 + "print(w)\n"
    h = EditHistory()
    h.open("u", far)
    text = type_into(h, "u", far, 1, "idth")
    engine = ScriptedEngine(keep, 0.9)
    s = suggest(engine, _job(text, h), NeverCancelled())
    # Nothing is implied near the edit, so only the window of the far use asks the model.
    assert len(engine.requests) == 1 and s.trace["windows"] == [len(text.splitlines()) - 1]
    assert [new for _, _, new, _ in s.edits] == ["width"] and text[s.edits[0][0]:s.edits[0][1]] == "w"
    # A `w` in another function's scope is another name: a parameter's rename stays in its `def`.
    far = SRC + "\n" * 30 + "print(w)\n"
    h.open("v", far)
    text = type_into(h, "v", far, far.index("w, h") + 1, "idth")
    s = suggest(ScriptedEngine(keep, 0.9), _job(text, h, uri="v"), NeverCancelled())
    assert [text[a:b] for a, b, _, _ in s.edits] == ["w"] and s.edits[0][0] < text.index("print")


def test_line_hunks_see_pure_insertions_and_deletions():
    [ins] = line_hunks("a\nb\n", "a\nx\nb\n")
    assert ins.before == () and ins.after == ("x",) and ins.line_after == 1
    [dele] = line_hunks("a\nx\nb\n", "a\nb\n")
    assert dele.before == ("x",) and dele.after == () and list(dele.new_lines) == []


def test_a_change_cancels_the_running_job_and_an_answer_for_an_older_text_is_dropped():
    import asyncio
    import threading

    from lsprotocol import types

    from dg_lsp.documents import DocumentStore
    from dg_lsp.features.next_edit import NextEdits
    from dg_lsp.next_edit import Suggestion
    from dg_lsp.scheduler import Scheduler

    async def scenario():
        docs = DocumentStore()
        docs.open(types.TextDocumentItem("u", "python", 1, SRC))
        server = SimpleNamespace(documents=docs, scheduler=Scheduler(), settings=Settings(), loop=None,
                                 host=SimpleNamespace(latencies=SimpleNamespace(record=lambda *a: None)))
        edits = NextEdits(server)
        started, seen = threading.Event(), {}

        def job(token):
            started.set()
            while not token.is_cancelled():
                threading.Event().wait(0.01)
            seen["reason"] = token.reason
            return None

        future, _ = server.scheduler.submit(job, supersedes=("nextEdit", "u"))
        await asyncio.get_running_loop().run_in_executor(None, started.wait)
        docs.change("u", 2, [types.TextDocumentContentChangeWholeDocument(SRC + "x = 1\n")])
        edits.changed("u")
        await future
        assert seen["reason"] == "the document changed" and edits.cancelled == 1
        old = Suggestion("u", 1, [(0, 1, "C", 0.9)], 0.9)
        edits.record(SimpleNamespace(snapshot=Snapshot("u", 1, "python", SRC)), old)
        assert edits.stored("u", 1) is None and edits.stored("u", 2) is None and edits.proposed == 0
        fresh = Suggestion("u", 2, [(0, 1, "C", 0.9)], 0.9)
        edits.record(SimpleNamespace(snapshot=Snapshot("u", 2, "python", SRC + "x = 1\n")), fresh)
        assert edits.stored("u", 2) is fresh and edits.proposed == 1
        server.scheduler.shutdown()

    asyncio.run(scenario())
