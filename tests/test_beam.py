"""The line lead by beam search (`dg_engine.beam`), on the tiny random model."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from transformers import DynamicCache

from dg_engine import FillRequest
from dg_engine.beam import Hypothesis, beam_line, beam_lead
from dg_engine.kvcache import fork
from dg_engine.lead import lead

PREFIX = "def area(width, height):\n    return "
SUFFIX = "\n\n\nprint(area(2, 3))\n"


class EveryThird:
    """Stands in for `Lines`: a "line" ends after every third token, so the random head's lines end."""

    def ended(self, ids):
        return len(ids) >= 3

    def blank(self, token):
        return False


@pytest.fixture(autouse=True)
def unhealed(engine):
    engine.defaults = replace(engine.defaults, heal=False)


def prompt_state(engine):
    prefill = engine.prefix_cache.prefill(engine.format.infill_ids(PREFIX, SUFFIX), reuse=False)
    return engine.prefix_cache.last_hidden, prefill.cache, prefill.prompt_tokens


@pytest.mark.parametrize("stop_above", [1.0, 1e-12])
def test_a_beam_of_one_is_the_greedy_lead(engine, stop_above):
    hidden, cache, start = prompt_state(engine)
    stops = set(engine.format.stop_ids)
    greedy = lead(engine.model, hidden, fork(cache, 1), start, 8, stops, EveryThird(), stop_above=stop_above)
    beamed = beam_lead(engine.model, hidden, fork(cache, 1), start, 8, stops, EveryThird(), stop_above=stop_above,
                       width=1)
    assert (beamed.ids, beamed.stopped) == (greedy.ids, greedy.stopped)
    assert beamed.confidences == pytest.approx(greedy.confidences)


def test_the_beam_returns_the_likeliest_line_of_those_it_kept(engine):
    """Every finished line's score is the head's own log-probability of it, which a plain pass over
    prompt + line gives; the first is the best of them, and no worse than the greedy line."""
    hidden, cache, start = prompt_state(engine)
    stops = set(engine.format.stop_ids)
    hyps, passes = beam_line(engine.model, hidden, fork(cache, 1), start, 6, stops, EveryThird(), width=4)
    assert len(hyps) >= 4 and passes <= 6
    prompt = engine.format.infill_ids(PREFIX, SUFFIX)
    for hyp in hyps[:4]:
        assert not hyp.stopped  # the random head gives the end of the middle next to nothing
        ids = torch.tensor([prompt + hyp.ids])
        with torch.no_grad():
            states = engine.model.model.encoder(input_ids=ids).last_hidden_state
        from dg_engine.autoregressive import head_logits

        logp = torch.log_softmax(head_logits(engine.model, states[0, len(prompt) - 1:-1]).float(), -1)
        total = float(logp[torch.arange(len(hyp.ids)), torch.tensor(hyp.ids)].sum())
        assert hyp.logp == pytest.approx(total, abs=1e-3)
    scores = [h.score(1.0) for h in hyps]
    assert scores == sorted(scores, reverse=True)
    greedy = lead(engine.model, hidden, fork(cache, 1), start, 3, stops, EveryThird())
    greedy_logp = sum(math.log(c) for c in greedy.confidences)
    assert hyps[0].score(1.0) >= greedy_logp / len(greedy.ids) - 1e-6


@pytest.mark.parametrize("above", [-1e-3, 1e-3, 1e9])
def test_with_a_margin_the_beams_line_replaces_the_greedy_one_only_when_it_scores_that_much_higher(engine, above):
    hidden, cache, start = prompt_state(engine)
    stops = set(engine.format.stop_ids)
    beamed, _ = beam_line(engine.model, hidden, fork(cache, 1), start, 8, stops, EveryThird(), width=4)
    greedy, _ = beam_line(engine.model, hidden, fork(cache, 1), start, 8, stops, EveryThird(), width=1)
    gap = beamed[0].score(0.5) - greedy[0].score(0.5)
    assert gap > 0 and beamed[0].ids != greedy[0].ids  # the random head's beam finds a likelier line
    margin = max(gap + above, 1e-9)
    led = beam_lead(engine.model, hidden, fork(cache, 1), start, 8, stops, EveryThird(), width=4, margin=margin)
    want = beamed[0] if gap > margin else greedy[0]
    assert led.ids[:len(want.ids)] == want.ids
    unmargined = beam_lead(engine.model, hidden, fork(cache, 1), start, 8, stops, EveryThird(), width=4)
    assert unmargined.ids[:len(beamed[0].ids)] == beamed[0].ids


def test_the_beam_leaves_the_prompts_cache_as_it_found_it(engine):
    hidden, cache, start = prompt_state(engine)
    before = [layer.keys.clone() for layer in cache.layers]
    beam_line(engine.model, hidden, fork(cache, 1), start, 6, set(engine.format.stop_ids), EveryThird(), width=4)
    assert all(torch.equal(a, layer.keys) for a, layer in zip(before, cache.layers))


def test_scores_rank_by_mean_or_by_whole_probability():
    short, long = Hypothesis([1], logp=-1.0), Hypothesis([1, 2, 3], logp=-2.4)
    assert long.score(1.0) > short.score(1.0)  # -0.8 per token against -1.0
    assert short.score(0.0) > long.score(0.0)
    assert Hypothesis([1], logp=-1.0, stopped=True).score(1.0) == -0.5  # the stop is an event too


def test_an_engine_fill_with_a_beam_writes_its_line_then_the_canvas(engine):
    plain = engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=6, lead_line=True))
    one = engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=6, lead_line=True, lead_beam=1))
    assert one.candidates[0].token_ids == plain.candidates[0].token_ids
    wide = engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=6, lead_line=True, lead_beam=4))
    cand = wide.candidates[0]
    assert 0 < cand.lead <= 6 and wide.canvases == 1 and len(cand.token_ids) > cand.lead


class Fixed:
    """A head that gives every row the same distribution: tokens 0 and 1, and the stop 5."""

    def __init__(self, probs: dict[int, float]):
        self.logits = torch.full((6,), -1e9)
        for token, p in probs.items():
            self.logits[token] = math.log(p)

    def __call__(self, model, hidden):
        return self.logits.expand(hidden.shape[0], -1)


@pytest.mark.parametrize("p_stop, stops", [(0.35, False), (0.45, True)])
def test_the_beam_ends_the_middle_only_where_the_greedy_head_would(monkeypatch, p_stop, stops):
    """A stop that is not a row's likeliest token (and below the threshold) is not a finished line:
    scored as one it beat every line of text, ending multi-line middles after their first line."""
    import dg_engine.beam as beam

    monkeypatch.setattr(beam, "next_token_logits", Fixed({0: 0.4, 1: 1 - 0.4 - p_stop, 5: p_stop}))
    monkeypatch.setattr(beam, "encode_rows", lambda model, prompt, tails, tokens, position: torch.zeros(len(tokens), 1, 4))
    hyps, _ = beam_line(None, torch.zeros(1, 1, 4), DynamicCache(), 10, 6, {5}, EveryThird(), width=3)
    assert hyps[0].stopped == stops
    assert hyps[0].ids == ([] if stops else [0, 0, 0])
    assert all(not h.stopped for h in hyps) or stops


def test_the_lead_keeps_the_beams_other_finished_lines_as_alternatives(monkeypatch):
    """With an infinite margin the greedy line leads; the beam's other lines come after it, each
    different from it and from each other, as whole middles."""
    import dg_engine.beam as beam

    monkeypatch.setattr(beam, "next_token_logits", Fixed({0: 0.5, 1: 0.3, 5: 0.2}))
    monkeypatch.setattr(beam, "encode_rows", lambda model, prompt, tails, tokens, position: torch.zeros(len(tokens), 1, 4))
    monkeypatch.setattr(beam, "extend", lambda model, cache, ids, start: torch.zeros(1, 1, 4))
    monkeypatch.setattr(beam, "lead", lambda *args, prior=None, **kwargs: prior)
    led = beam_lead(None, torch.zeros(1, 1, 4), DynamicCache(), 10, 6, {5}, EveryThird(), width=3, margin=math.inf)
    assert led.ids == [0, 0, 0]  # the greedy line
    others = [a.ids for a in led.alternatives]
    assert others and len(others) <= 2 and [0, 0, 0] not in others and len(set(map(tuple, others))) == len(others)
    assert all(a.stopped and len(a.ids) == 3 for a in led.alternatives)
    # Healing trims the alternatives as it trims the line they stand beside.
    from dg_engine import healing

    class Tok:
        def decode(self, ids):
            return "ab"

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [9]}

    trimmed = healing.trim(Tok(), led, healing.Heal(text="a", allowed=torch.tensor([0])))
    assert trimmed.ids[0] == 9 and all(a.ids[0] == 9 for a in trimmed.alternatives)
