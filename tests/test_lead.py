"""Fills led by the encoder's next-token head (`dg_engine.lead`), on the tiny random model."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import replace

import pytest
import torch

from dg_engine import FillRequest
from dg_engine.autoregressive import ar_generate
from dg_engine.config import LEAD_CONFIG, tuned_lead_tokens
from dg_engine.denoise import denoise
from dg_engine.kvcache import PrefixCache, fork

PREFIX = "def area(width, height):\n    return "
SUFFIX = "\n\n\nprint(area(2, 3))\n"


@pytest.fixture(autouse=True)
def unhealed(engine):
    """The lead's own mechanics, compared with the plain greedy head: PREFIX ends with a space,
    which the engine would otherwise heal (`healing.py`, tested in test_healing.py)."""
    engine.defaults = replace(engine.defaults, heal=False)


def head_tokens(engine, count: int) -> list[int]:
    """The head's greedy tokens after the prompt, decoded the plain autoregressive way."""
    prompt = engine.format.infill_ids(PREFIX, SUFFIX)
    ids, _, _ = ar_generate(engine.model, prompt, count, set(engine.format.stop_ids))
    return ids


def test_the_lead_is_the_heads_greedy_tokens_and_the_canvas_continues_after_them(engine):
    lead = head_tokens(engine, 3)
    assert len(lead) == 3, "the tiny model's head must not end this middle at once"
    result = engine.fill(FillRequest(PREFIX, SUFFIX, seed=5, lead_tokens=3))
    cand = result.candidates[0]
    assert cand.lead == 3 and cand.token_ids[:3] == lead and cand.canvas[:3] == lead
    assert len(cand.confidences) == len(cand.token_ids) == len(cand.token_offsets)
    assert cand.token_offsets[-1][1] == len(cand.text)
    assert result.timings["leadTokens"] == 3
    # The canvas is what a denoiser makes from the prompt whose prefix ends with the head's text:
    # the canvas starts right after <fim_middle>, as in training.
    torch.manual_seed(5)
    text = engine.tokenizer.decode(lead, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    context = PrefixCache(engine.model).prefill(engine.format.infill_ids(PREFIX + text, SUFFIX)).cache
    options = engine.options(FillRequest(PREFIX, SUFFIX))
    plan, strategy = engine._fresh_plan(options)
    cache = fork(context, 1)
    out = denoise(lambda c, sc: engine._decode(c, sc, cache), 1, plan, options, engine.vocab_size,
                  engine.device, strategy)
    assert cand.canvas[3:] == out.tokens[0].tolist()
    assert cand.text.startswith(text)
    assert cand.steps == int(out.steps[0]) + 3  # three single-token encoder passes for the lead


def test_a_led_fill_leaves_the_prefix_cache_holding_only_the_prompt(engine):
    led = engine.fill(FillRequest(PREFIX, SUFFIX, seed=1, lead_tokens=4, max_canvases=2))
    assert engine.prefix_cache.cache.get_seq_length() == led.prompt_tokens == len(engine.prefix_cache.tokens)
    # So the next, unled fill reuses the cache and matches one from a cold cache.
    warm = engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=0))
    cold = engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=0, reuse_cache=False))
    assert warm.reused_tokens == warm.prompt_tokens
    assert [c.token_ids for c in warm.candidates] == [c.token_ids for c in cold.candidates]


def test_no_lead_by_default_and_none_for_rewrites_joint_fills_or_holes_inside_a_line(engine):
    assert engine.defaults.lead_tokens == 0
    plain = engine.fill(FillRequest(PREFIX, SUFFIX, seed=3))
    assert all(c.lead == 0 for c in plain.candidates) and "leadTokens" not in plain.timings
    rewrite = engine.fill(FillRequest(PREFIX, SUFFIX, seed_text="width * height", lead_tokens=4))
    joint = engine.fill(FillRequest("def f(a, b):\n    x = ", "\n", segments=(3, "\n    y = ", 3), lead_tokens=4))
    assert all(c.lead == 0 for c in rewrite.candidates + joint.candidates)
    # A hole that closes inside its line is left to the decoder; one whose line ends after it is led.
    inside = engine.fill(FillRequest("def area(", "):\n    pass\n", lead_tokens=4))
    at_end = engine.fill(FillRequest("def area(", "   \n    pass\n", lead_tokens=4))
    assert all(c.lead == 0 for c in inside.candidates) and "leadTokens" not in inside.timings
    assert at_end.timings.get("leadTokens", 0) > 0 or at_end.canvases == 0


def test_a_head_that_ends_the_middle_needs_no_canvas(engine, monkeypatch):
    import dg_engine.engine as module

    first = head_tokens(engine, 2)
    original = module.lead

    def stops_after_one(model, hidden, cache, start, count, stop_ids, lines=None, first_ids=None, stop_above=1.0):
        # The head's second token counts as the end of the middle.
        return original(model, hidden, cache, start, count, set(stop_ids) | {first[1]}, lines, first_ids, stop_above)

    monkeypatch.setattr(module, "lead", stops_after_one)
    calls = []
    monkeypatch.setattr(engine, "_decode", lambda *a: calls.append(a))
    result = engine.fill(FillRequest(PREFIX, SUFFIX, n=2, lead_tokens=4))
    assert not calls and result.canvases == 0
    (cand,) = result.candidates
    assert cand.token_ids == first[:1] and cand.finished and cand.lead == 1


def test_drafts_while_denoising_start_with_the_lead(engine):
    lead = head_tokens(engine, 2)
    drafts = []
    engine.fill(FillRequest(PREFIX, SUFFIX, seed=6, lead_tokens=2), on_step=lambda i, c: drafts.append(c[0].tolist()))
    assert drafts and all(d[:2] == lead for d in drafts)


def test_repair_re_noises_only_the_decoders_positions(engine):
    request = FillRequest(PREFIX, SUFFIX, seed=4, lead_tokens=2)
    first = engine.fill(request).candidates[0]
    assert engine.renoise(request, first, [0, 1]) is first  # the head's tokens are not re-noised
    repaired = engine.renoise(request, first, [1, 3, 4])
    changed = [i for i, (a, b) in enumerate(zip(first.canvas, repaired.canvas)) if a != b]
    assert set(changed) <= {3, 4}
    assert repaired.canvas[:2] == first.canvas[:2] and repaired.lead == 2
    assert repaired.steps > first.steps
    assert engine.prefix_cache.cache.get_seq_length() == len(engine.prefix_cache.tokens)


def test_the_prompts_last_hidden_state_is_right_after_the_prompt_shrinks(engine):
    long = engine.format.infill_ids(PREFIX + "width * height", SUFFIX)
    short = engine.format.infill_ids(PREFIX, SUFFIX)
    warm = PrefixCache(engine.model)
    warm.prefill(long)
    prefill = warm.prefill(short)
    assert prefill.encoded_tokens >= 1 and prefill.cache.get_seq_length() == len(short)
    cold = PrefixCache(engine.model)
    cold.prefill(short)
    assert torch.allclose(warm.last_hidden, cold.last_hidden, atol=1e-5)
    again = warm.prefill(short)  # the same prompt again: nothing to encode, the state still holds
    assert again.encoded_tokens == 0 and torch.allclose(warm.last_hidden, cold.last_hidden, atol=1e-5)


def test_a_model_directory_sets_its_lead_and_bad_settings_fall_back(tiny_dir, tmp_path, caplog):
    model = tmp_path / "model"
    shutil.copytree(tiny_dir, model)
    assert tuned_lead_tokens(model) == 0
    (model / LEAD_CONFIG).write_text(json.dumps({"lead_tokens": 4}))
    assert tuned_lead_tokens(model) == 4
    for bad in ('{"lead_tokens": -1}', '{"lead_tokens": 2.5}', '{"lead_tokens": true}', "{", '{"lead": 4}'):
        (model / LEAD_CONFIG).write_text(bad)
        with caplog.at_level(logging.WARNING):
            caplog.clear()
            assert tuned_lead_tokens(model) == 0
        assert LEAD_CONFIG in caplog.text and "ignored" in caplog.text


def test_the_server_fill_reports_the_lead_and_repairs_around_it(engine, monkeypatch):
    import dataclasses

    from dg_lsp.documents import Snapshot
    from dg_lsp.fill import FillJob, run_fill
    from dg_lsp.settings import Settings

    engine.defaults = dataclasses.replace(engine.defaults, lead_tokens=3)
    assert engine.info()["leadTokens"] == 3
    repaired = []
    original = engine.renoise
    monkeypatch.setattr(engine, "renoise", lambda r, c, p, cancel=None: repaired.append((c.lead, p))
                        or original(r, c, p, cancel))
    text = "def f(x):\n    return (x + \n"
    snap = Snapshot("file:///w/a.py", 1, "python", text)
    settings = Settings().update({"maxSteps": 3, "repairRounds": 2, "variableLength": False})[0]
    at = len("def f(x):\n    return (x + ")
    fill = run_fill(engine, FillJob(snap, at, at, "fim", settings), None)
    assert fill.trace["leadTokens"] == 3
    assert repaired and all(lead == 3 for lead, _ in repaired)


def test_a_line_lead_writes_the_first_line_and_stops_where_the_next_line_of_text_starts(engine):
    from dg_engine.lead import lead

    head = head_tokens(engine, 4)
    assert len(head) == 4

    class FirstTwoAreALine:
        # Stands in for `Lines`: the "line" ends at the head's second token; `blanks` are blank.
        def __init__(self, blanks: set[int]):
            self.blanks = blanks

        def ended(self, ids):
            return len(ids) >= 2

        def blank(self, token):
            return token in self.blanks

    def run(stop_ids, blanks=frozenset()):
        prefill = engine.prefix_cache.prefill(engine.format.infill_ids(PREFIX, SUFFIX), reuse=False)
        return lead(engine.model, engine.prefix_cache.last_hidden, fork(prefill.cache, 1), prefill.prompt_tokens,
                    32, stop_ids, FirstTwoAreALine(set(blanks)))

    going_on = run(set(engine.format.stop_ids))
    assert going_on.ids == head[:2] and not going_on.stopped and going_on.passes == 2
    # When the head's next token after the line is a stop token, the middle ends with the line.
    ending = run(set(engine.format.stop_ids) | {head[2]})
    assert ending.ids == head[:2] and ending.stopped
    # A blank token after the line is the head's too; the next line's text is not.
    blank_after = run(set(engine.format.stop_ids), {head[2]})
    assert blank_after.ids == head[:3] and not blank_after.stopped


def test_a_line_lead_through_the_engine_is_capped_and_the_canvas_continues(engine):
    plain = head_tokens(engine, 6)
    result = engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=6, lead_line=True))
    cand = result.candidates[0]
    # The random head writes no line break here, so the cap ends the lead (or a loop cuts it short).
    assert 0 < cand.lead <= 6 and cand.token_ids[: cand.lead] == plain[: cand.lead]
    assert result.canvases == 1 and len(cand.token_ids) > cand.lead


def test_a_looping_head_is_cut_back_to_one_copy():
    from dg_engine.lead import looping

    assert looping([5, 1, 2, 1, 2, 1, 2]) == 4  # (1, 2) three times: keep one
    assert looping([9, 7, 7, 7, 7]) == 3  # one token four times
    assert looping([7, 7, 7]) == 0  # three of one token is not yet a loop
    assert looping([1, 2, 3, 1, 2, 3, 1, 2]) == 0  # a third copy not finished
    assert looping([1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4]) == 8
    assert looping(list(range(30))) == 0


def test_a_line_ends_at_a_break_after_text_not_at_a_leading_break(engine):
    from dg_engine.lead import Lines

    lines = Lines(engine.tokenizer)
    ids = lambda text: engine.tokenizer.encode(text, add_special_tokens=False)
    assert lines.ended(ids("x = 1\n"))
    assert not lines.ended(ids("x = 1"))
    assert not lines.ended(ids("\n    "))  # a middle that starts on the next line has not ended a line yet
    assert lines.ended(ids("\n    y = 2\n"))
    assert lines.blank(ids("\n")[0]) and not lines.blank(ids("x")[0])


def test_a_model_directory_asks_for_a_line_lead_and_a_bad_value_is_ignored(tiny_dir, tmp_path, caplog):
    from dg_engine.config import tuned_lead_line

    model = tmp_path / "model"
    shutil.copytree(tiny_dir, model)
    assert tuned_lead_line(model) is False
    (model / LEAD_CONFIG).write_text(json.dumps({"lead_tokens": 32, "lead_line": True}))
    assert tuned_lead_line(model) is True and tuned_lead_tokens(model) == 32
    (model / LEAD_CONFIG).write_text(json.dumps({"lead_tokens": 4}))
    assert tuned_lead_line(model) is False
    (model / LEAD_CONFIG).write_text(json.dumps({"lead_tokens": 32, "lead_line": "yes"}))
    with caplog.at_level(logging.WARNING):
        assert tuned_lead_line(model) is False
    assert "lead_line" in caplog.text


def test_a_line_lead_ends_the_middle_once_its_stop_tokens_pass_the_threshold(engine):
    # Any stop probability at all passes a threshold of almost nothing: one head token, no canvas.
    ends = engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=6, lead_line=True, lead_stop=1e-12))
    (cand,) = ends.candidates
    assert cand.lead == 1 and cand.finished and ends.canvases == 0
    assert cand.token_ids == head_tokens(engine, 1)
    # At 1.0 only a stop token ranked first ends it, as without the setting.
    plain = engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=6, lead_line=True))
    assert engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=6, lead_line=True, lead_stop=1.0)
                       ).candidates[0].token_ids == plain.candidates[0].token_ids
    assert plain.candidates[0].lead > 1


def test_a_block_on_a_fresh_line_ends_only_where_a_stop_token_ranks_first(engine):
    # The cursor at a line's indentation, several canvases allowed (a code action's block): the
    # threshold would decide how many lines the fill has, so the head writes on as at 1.
    fresh = "def area(width, height):\n    "

    def head(lead_stop: float, canvases: int):
        return engine.fill(FillRequest(fresh, SUFFIX, seed=2, lead_tokens=6, lead_line=True, lead_stop=lead_stop,
                                       max_canvases=canvases)).candidates[0]

    block, plain = head(1e-12, 4), head(1.0, 4)
    assert block.token_ids == plain.token_ids and plain.lead > 1
    # An inline fill (one canvas) on the same line ends where the threshold says.
    inline = head(1e-12, 1)
    assert inline.lead == 1 and inline.finished


def test_the_stop_threshold_of_each_kind_of_fill():
    from dg_engine.lead import stop_threshold

    assert stop_threshold(FillRequest("x = 1\n    return ", "\n", max_canvases=4), 0.1) == 0.1
    assert stop_threshold(FillRequest("x = 1\n    ", "\n", max_canvases=4), 0.1) == 1.0
    assert stop_threshold(FillRequest("", "\n", max_canvases=4), 0.1) == 1.0
    assert stop_threshold(FillRequest("x = 1\n    ", "\n"), 0.1) == 0.1


@pytest.mark.parametrize("key, default, good, bad", [("lead_stop", 1.0, 0.05, 2), ("lead_beam", 1, 3, 0),
                                                     ("lead_margin", 0.0, 0.5, -1)])
def test_a_model_directory_sets_its_lead_stop_beam_and_margin_and_a_bad_value_is_ignored(tiny_dir, tmp_path, caplog,
                                                                                         key, default, good, bad):
    from dg_engine.config import tuned_lead_beam, tuned_lead_margin, tuned_lead_stop

    tuned = {"lead_stop": tuned_lead_stop, "lead_beam": tuned_lead_beam, "lead_margin": tuned_lead_margin}[key]
    model = tmp_path / "model"
    shutil.copytree(tiny_dir, model)
    assert tuned(model) == default
    (model / LEAD_CONFIG).write_text(json.dumps({"lead_tokens": 32, "lead_line": True, key: good}))
    assert tuned(model) == good
    (model / LEAD_CONFIG).write_text(json.dumps({"lead_tokens": 32, key: bad}))
    with caplog.at_level(logging.WARNING):
        assert tuned(model) == default
    assert key in caplog.text


def test_the_lead_tuner_keeps_the_models_stop_threshold(tiny_dir, tmp_path):
    from dg_engine.config import tuned_lead_stop
    from dg_engine.train import tune_lead

    model = tmp_path / "model"
    shutil.copytree(tiny_dir, model)
    (model / LEAD_CONFIG).write_text(json.dumps({"lead_tokens": 4, "lead_stop": 0.2}))
    assert tune_lead.main(["--model", str(model), "--cases", "2", "--leads", "line", "--write"]) == 0
    assert json.loads((model / LEAD_CONFIG).read_text()) == {"lead_tokens": 32, "lead_line": True, "lead_stop": 0.2}
    assert tuned_lead_stop(model) == 0.2


@pytest.mark.parametrize("leads, written", [
    ("line/2", {"lead_tokens": 32, "lead_line": True, "lead_beam": 2, "lead_margin": 0.5}),
    ("line", {"lead_tokens": 32, "lead_line": True}),  # a margin means nothing without a beam
])
def test_the_lead_tuner_keeps_the_beams_margin_for_a_beam(tiny_dir, tmp_path, leads, written):
    from dg_engine.config import tuned_lead_margin
    from dg_engine.train import tune_lead

    model = tmp_path / "model"
    shutil.copytree(tiny_dir, model)
    (model / LEAD_CONFIG).write_text(json.dumps({"lead_tokens": 4, "lead_margin": 0.5}))
    assert tune_lead.main(["--model", str(model), "--cases", "2", "--leads", leads, "--write"]) == 0
    assert json.loads((model / LEAD_CONFIG).read_text()) == written
    assert tuned_lead_margin(model) == written.get("lead_margin", 0.0)
