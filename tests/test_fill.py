"""The fill pipeline on the tiny model: repair, variable lengths, joint holes, minimal edits."""

from __future__ import annotations

import dataclasses

import pytest

from dg_lsp.documents import Snapshot
from dg_lsp.edits import apply_edits, minimal_edits
from dg_lsp.fill import FillJob, error_positions, request_for, run_fill
from dg_lsp.joint import run_joint
from dg_lsp.settings import Settings
from dg_lsp.syntax import extract_context, language_for


def job(text: str, start: int, end: int | None = None, mode: str = "fim", **settings) -> FillJob:
    snap = Snapshot("file:///w/a.py", 1, "python", text)
    base = Settings().update({"maxSteps": 3, **settings})[0]
    return FillJob(snap, start, start if end is None else end, mode, base)


def test_actions_try_several_lengths_and_inline_does_not():
    text = "def f(x):\n    return x\n"
    fim = job(text, 10, mode="fim")
    ctx = extract_context(text, 10, 10, language_for("python", None))
    assert request_for(fim, ctx).lengths == (16, 32, 64)
    assert request_for(dataclasses.replace(fim, mode="inline"), ctx).lengths == ()
    off = job(text, 10, mode="fim", variableLength=False)
    assert request_for(off, ctx).lengths == ()


def test_the_lead_beam_setting_reaches_the_request_and_bad_values_fall_back():
    text = "def f(x):\n    return x\n"
    ctx = extract_context(text, 10, 10, language_for("python", None))
    assert request_for(job(text, 10), ctx).lead_beam is None  # 0: the model's own default
    assert request_for(job(text, 10, leadBeam=3), ctx).lead_beam == 3
    # Ghost text is the greedy head's unless the user sets a beam.
    assert request_for(job(text, 10, mode="inline"), ctx).lead_beam == 1
    assert request_for(job(text, 10, mode="inline", leadBeam=3), ctx).lead_beam == 3
    settings, problems = Settings().update({"leadBeam": 99})
    assert settings.engine.lead_beam == 0 and any("lead_beam" in p for p in problems)
    assert Settings().update({"lead_beam": True})[0].engine.lead_beam == 0


def test_syntax_repair_renoises_tokens_of_fills_that_add_errors(engine, monkeypatch):
    calls = []
    original = engine.renoise

    def spy(request, cand, positions, cancel=None):
        calls.append(positions)
        return original(request, cand, positions, cancel)

    monkeypatch.setattr(engine, "renoise", spy)
    text = "def f(x):\n    return (x + \n"
    # Noise from a random model nearly always breaks the syntax, so repair must kick in.
    # (Code actions: ghost text first salvages a start that parses and repairs only when none does.)
    run_fill(engine, job(text, len("def f(x):\n    return (x + "), mode="fim", repairRounds=2, variableLength=False), None)
    assert calls and all(positions == sorted(set(positions)) for positions in calls)
    calls.clear()
    run_fill(engine, job(text, len("def f(x):\n    return (x + "), mode="fim", syntaxRepair=False, variableLength=False), None)
    assert calls == []


def test_ghost_text_repairs_only_within_its_budget(engine, monkeypatch):
    import dg_lsp.fill as fill_module

    # A clock that only moves when the model works: each fill or repair round takes 100 "ms".
    now = [0.0]
    monkeypatch.setattr(fill_module.time, "perf_counter", lambda: now[0])
    fill, renoise = engine.fill, engine.renoise
    rounds = []

    def slow_fill(*args, **kwargs):
        result = fill(*args, **kwargs)
        now[0] += 0.1
        return dataclasses.replace(result, denoise_ms=100.0)

    def slow_renoise(*args, **kwargs):
        rounds.append(now[0])
        now[0] += 0.1
        return renoise(*args, **kwargs)

    monkeypatch.setattr(engine, "fill", slow_fill)
    monkeypatch.setattr(engine, "renoise", slow_renoise)
    # Between a `def`'s parameters and its colon nothing the untrained model writes parses.
    text = "def total(xs):\n    return sum(xs)\n"
    at = len("def total(xs)")

    def ghost(budget_ms: int, mode: str = "inline") -> int:
        rounds.clear()
        now[0] = 0.0
        run_fill(engine, job(text, at, mode=mode, repairRounds=3, variableLength=False,
                             inline={"repairBudgetMs": budget_ms}), None)
        return len(rounds)

    parses = []
    error_positions = fill_module.error_positions
    monkeypatch.setattr(fill_module, "error_positions", lambda *a, **k: parses.append(1) or error_positions(*a, **k))
    assert ghost(0) == 0
    assert parses == []  # past the deadline, the fill is not even parsed for its errors
    assert ghost(150) == 0  # the fill took 100 ms; a round as long would end at 200
    assert ghost(250) == 1  # one round ends at 200; a second would end at 300
    assert ghost(10_000) == 3
    # Commands are not held to the ghost-text budget.
    assert ghost(0, mode="fim") == 3


def test_the_inline_repair_budget_is_validated():
    settings, problems = Settings().update({"inline": {"repairBudgetMs": -5}})
    assert settings.inline_repair_budget_ms == 250 and problems
    assert Settings().update({"inline": {"repairBudgetMs": 0}})[0].inline_repair_budget_ms == 0


def test_error_positions_cover_the_broken_tokens(engine):
    from dg_engine import FillRequest

    text = "x = [1, 2\ny = 3\n"
    spec = language_for("python", None)
    ctx = extract_context(text, 9, 9, spec)
    cand = engine.fill(FillRequest(ctx.prefix, ctx.suffix)).candidates[0]
    cand = dataclasses.replace(cand, text=")]", token_offsets=[(0, 1), (1, 2)], token_ids=cand.token_ids[:2])
    positions = error_positions(cand, ctx, spec)
    assert 0 in positions or 1 in positions


def test_joint_fill_returns_one_edit_per_hole(engine):
    text = "def a():\n    ...\n\n\ndef b():\n    ...\n"
    holes = [(text.index("..."), text.index("...") + 3), (text.rindex("..."), text.rindex("...") + 3)]
    edits, fill = run_joint(engine, job(text, holes[0][0], holes[1][1], mode="holes"), holes, None)
    assert [(a, b) for a, b, _ in edits] == holes
    assert fill.kind == "holes" and fill.steps >= 1


@pytest.mark.parametrize("old,new", [
    ("the quick brown fox", "the quick red fox"),
    ("a b c d", "a c d e"),
    ("same", "same"),
    ("", "new text"),
])
def test_minimal_edits_rebuild_the_new_text_and_touch_only_changes(old, new):
    edits = minimal_edits(old, new, base=10)
    doc = "0123456789" + old + "!"
    assert apply_edits(doc, edits) == "0123456789" + new + "!"
    changed = sum(b - a for a, b, _ in edits)
    assert changed <= len(old)
    if old == "the quick brown fox":
        assert edits == [(20, 25, "red")]


def test_cross_file_chunks_come_from_similar_open_and_recently_closed_files():
    from dg_lsp.crossfile import ChunkIndex

    index = ChunkIndex()
    current = Snapshot("file:///w/app.py", 1, "python", "from shapes import area_of_circle\n\nx = area_of_circle(")
    helper = Snapshot("file:///w/shapes.py", 3, "python", "import math\n\n\ndef area_of_circle(radius):\n    return math.pi * radius ** 2\n")
    other = Snapshot("file:///w/other.py", 1, "python", "def unrelated_function():\n    pass\n")
    index.retire(helper)
    chunks = index.best(current, len(current.text), index.recent() + [other], budget_chars=2000)
    assert chunks and "area_of_circle" in chunks[-1] and all("unrelated_function" not in c for c in chunks)
    index.reopened(helper.uri)
    assert index.recent() == []


class _OrderedEngine:
    """An engine whose candidates come best first with the likelier tokens last, as a beam's
    other lines do: the greedy line first, then shorter lines of near-certain tokens."""

    def __init__(self, texts_and_confidences):
        from dg_engine.candidates import Candidate

        self.candidates = [Candidate(text=t, token_ids=[1] * len(t), token_offsets=[(i, i + 1) for i in range(len(t))],
                                     confidences=[c] * len(t), steps=1, tokens_per_forward=1.0, finished=True)
                           for t, c in texts_and_confidences]

    def fill(self, request, cancel=None, on_step=None):
        from dg_engine import FillResult

        return FillResult(candidates=list(self.candidates), prompt_tokens=1, reused_tokens=0, encoded_tokens=1,
                          prefill_ms=0.0, denoise_ms=0.0)


def test_the_server_offers_the_engines_order_after_moving_fills_that_break_the_syntax_last():
    text = "def f(items):\n    total = 0\n    \n    return total\n"
    at = text.index("    \n") + 4
    engine = _OrderedEngine([("total += len(items)", 0.3), ("total += (", 0.99), ("pass", 0.9), ("x", 0.95)])
    fill = run_fill(engine, dataclasses.replace(job(text, at, syntaxRepair=False), n=4), None)
    assert fill.texts[0] == "total += len(items)"
    assert fill.texts[1:3] == ["pass", "x"] and fill.texts[3].startswith("total += (")
