"""Engine behaviour on a tiny random model: the properties the editor relies on."""

from __future__ import annotations

import pytest
import torch

from dg_engine import Cancelled, FillRequest
from dg_engine.config import SamplingOptions
from dg_engine.denoise import CanvasPlan, EntropyBoundStrategy, RefineStrategy, denoise, initial_canvas

PREFIX = "def area(width, height):\n    return "
SUFFIX = "\n\n\nprint(area(2, 3))\n"


class CancelAfter:
    """Cancels once `steps` denoising steps have reported back."""

    def __init__(self, steps: int):
        self.steps, self.seen = steps, 0

    def on_step(self, index, draft):
        self.seen += 1

    def is_cancelled(self) -> bool:
        return self.seen >= self.steps


def count_forwards(engine, monkeypatch) -> list[int]:
    """Record the batch size of every decoder forward pass the engine makes."""
    calls: list[int] = []
    original = engine._decode

    def spy(canvas, sc, cache):
        calls.append(canvas.shape[0])
        return original(canvas, sc, cache)

    monkeypatch.setattr(engine, "_decode", spy)
    return calls


@pytest.mark.parametrize("after", [1, 3])
def test_cancellation_stops_within_one_step(engine, monkeypatch, after):
    calls = count_forwards(engine, monkeypatch)
    token = CancelAfter(after)
    with pytest.raises(Cancelled):
        engine.fill(FillRequest(PREFIX, SUFFIX, max_steps=8), cancel=token, on_step=token.on_step)
    assert len(calls) == after


def test_cancelled_request_leaves_engine_usable(engine):
    token = CancelAfter(1)
    with pytest.raises(Cancelled):
        engine.fill(FillRequest(PREFIX, SUFFIX), cancel=token, on_step=token.on_step)
    result = engine.fill(FillRequest(PREFIX, SUFFIX))
    assert result.candidates and result.candidates[0].steps >= 1


def _options(length: int, steps: int = 6) -> SamplingOptions:
    return SamplingOptions(length, steps, 0.5, 0.4, 0.8, 1, 0.005)


def _forward(engine, prefill_ids):
    cache = engine.prefix_cache.prefill(prefill_ids).cache
    from dg_engine.kvcache import fork

    def forward(canvas, sc):
        return engine._decode(canvas, sc, fork(cache, canvas.shape[0]))

    return forward


def test_clamped_positions_come_back_unchanged(engine):
    length = 12
    seed = torch.arange(100, 100 + length)
    clamped = torch.zeros(length, dtype=torch.bool)
    clamped[[0, 1, 5, 11]] = True
    plan = CanvasPlan(length, seed=seed, clamped=clamped)
    torch.manual_seed(3)
    out = denoise(
        _forward(engine, engine.format.infill_ids(PREFIX, SUFFIX)), 3, plan, _options(length),
        engine.vocab_size, engine.device, EntropyBoundStrategy(0.5, length, engine.vocab_size, 6),
    )
    assert torch.equal(out.tokens[:, clamped], seed[clamped].expand(3, -1))
    assert torch.allclose(out.confidence[:, clamped], torch.ones(3, 4))
    # The free positions were really denoised, not left as they started.
    assert not torch.equal(out.tokens[:, ~clamped], seed[~clamped].expand(3, -1))


def test_seed_canvas_starts_from_the_seed_and_refine_changes_few_tokens(engine):
    length = 16
    seed = torch.arange(200, 200 + length)
    plan = CanvasPlan(length, seed=seed, seeded=torch.ones(length, dtype=torch.bool))
    assert torch.equal(initial_canvas(plan, 2, engine.vocab_size, "cpu"), seed.expand(2, -1))
    torch.manual_seed(0)
    steps = 4
    out = denoise(
        _forward(engine, engine.format.infill_ids(PREFIX, SUFFIX)), 1, plan, _options(length, steps),
        engine.vocab_size, engine.device, RefineStrategy(0.5, length, engine.vocab_size, steps),
    )
    # The final answer is the model's guess; what matters is that the canvas it refined kept the seed
    # wherever the entropy bound accepted nothing, which `RefineStrategy` guarantees.
    assert out.steps.item() <= steps


def test_refine_strategy_keeps_rejected_tokens(engine):
    length = 16
    canvas = torch.arange(300, 300 + length)[None]
    logits = torch.randn(1, length, engine.vocab_size)  # high entropy: few tokens accepted
    sampled = torch.zeros_like(canvas)
    keep = RefineStrategy(0.01, length, engine.vocab_size, 4).step(canvas, sampled, logits, 4)
    noise = EntropyBoundStrategy(0.01, length, engine.vocab_size, 4).step(canvas, sampled, logits, 4)
    changed_keep = (keep != canvas).sum().item()
    assert 1 <= changed_keep <= 2  # only the accepted lowest-entropy token(s) changed
    assert (noise != canvas).sum().item() > changed_keep  # the default strategy re-noised the rest


def test_rewrite_keeps_most_of_the_seed(engine):
    text = "width * height"
    result = engine.fill(FillRequest(PREFIX, SUFFIX, seed_text=text, renoise_fraction=0.0, max_steps=2))
    ids = engine.format.tokenizer(text, add_special_tokens=False)["input_ids"]
    got = result.candidates[0].token_ids
    same = sum(a == b for a, b in zip(ids, got))
    # A random model accepts about one token per step, so at most two seed tokens can change.
    assert same >= len(ids) - 2


def test_a_rewrite_prompt_carries_the_chunks_as_a_fill_does(engine):
    """A next edit's recent edits reach the model: its training examples had them as chunks."""
    chunk = "@@ line 3\n-    w = 1\n+    width = 1\n"
    fmt = engine.format
    assert fmt.rewrite_ids(PREFIX, "x", SUFFIX, None, (chunk,)) == fmt.infill_ids(PREFIX, SUFFIX, (chunk,))
    plain = engine.fill(FillRequest(PREFIX, SUFFIX, seed_text="w * h", max_steps=1, reuse_cache=False))
    with_edit = engine.fill(FillRequest(PREFIX, SUFFIX, seed_text="w * h", max_steps=1, reuse_cache=False,
                                        chunks=(chunk,)))
    added = len(fmt.infill_ids("", "", (chunk,))) - len(fmt.infill_ids("", ""))
    assert added > 0 and with_edit.prompt_tokens == plain.prompt_tokens + added


def test_n_candidates_come_from_one_batch(engine, monkeypatch):
    calls = count_forwards(engine, monkeypatch)
    result = engine.fill(FillRequest(PREFIX, SUFFIX, n=4))
    assert len(result.candidates) == 4
    assert calls and set(calls) == {4}
    assert len(calls) == max(c.steps for c in result.candidates)


def test_output_is_deterministic_for_a_seed(engine):
    a = engine.fill(FillRequest(PREFIX, SUFFIX, n=2, seed=7, reuse_cache=False))
    b = engine.fill(FillRequest(PREFIX, SUFFIX, n=2, seed=7, reuse_cache=False))
    c = engine.fill(FillRequest(PREFIX, SUFFIX, n=2, seed=8, reuse_cache=False))
    assert [x.token_ids for x in a.candidates] == [x.token_ids for x in b.candidates]
    assert [x.token_ids for x in a.candidates] != [x.token_ids for x in c.candidates]


def test_kv_reuse_matches_cold_run_and_encodes_fewer_tokens(engine):
    engine.fill(FillRequest(PREFIX, SUFFIX, seed=1))
    typed = PREFIX + "width"
    warm = engine.fill(FillRequest(typed, SUFFIX, seed=5))
    cold = engine.fill(FillRequest(typed, SUFFIX, seed=5, reuse_cache=False))
    assert warm.reused_tokens > 0
    assert warm.encoded_tokens < cold.encoded_tokens == cold.prompt_tokens
    assert [c.token_ids for c in warm.candidates] == [c.token_ids for c in cold.candidates]


def test_prefix_cache_crops_when_the_prompt_shrinks(engine):
    long = engine.format.infill_ids(PREFIX + "width * height", SUFFIX)
    short = engine.format.infill_ids(PREFIX, SUFFIX)
    engine.prefix_cache.prefill(long)
    prefill = engine.prefix_cache.prefill(short)
    assert prefill.cache.get_seq_length() == len(short)
    assert 0 < prefill.reused_tokens < len(short)


def test_results_carry_confidence_offsets_and_timings(engine):
    result = engine.fill(FillRequest(PREFIX, SUFFIX, n=2))
    for cand in result.candidates:
        assert len(cand.confidences) == len(cand.token_ids) == len(cand.token_offsets)
        assert all(0.0 <= p <= 1.0 for p in cand.confidences)
        if cand.token_offsets:
            assert cand.token_offsets[-1][1] == len(cand.text)
        assert cand.tokens_per_forward > 0 and cand.steps >= 1
    assert result.prefill_ms >= 0 and result.denoise_ms > 0


def test_several_canvases_in_a_row(engine):
    result = engine.fill(FillRequest(PREFIX, "", max_canvases=3, seed=2))
    length = engine.defaults.canvas_length
    assert 1 <= result.canvases <= 3
    if result.canvases > 1:
        # The first canvas had no end-of-middle, so the middle is longer than one canvas.
        assert any(len(c.token_ids) > length - 1 for c in result.candidates)
    # The prefix cache still holds exactly the prompt: continuing canvases never leak into it.
    assert engine.prefix_cache.cache.get_seq_length() == result.prompt_tokens


def test_variable_lengths_run_in_one_batch_and_respect_each_length(engine, monkeypatch):
    calls = count_forwards(engine, monkeypatch)
    result = engine.fill(FillRequest(PREFIX, SUFFIX, n=2, lengths=(4, 8, 12)))
    assert len(result.candidates) == 6 and set(calls) == {6}
    by_length = {}
    for cand in result.candidates:
        by_length.setdefault(cand.length, []).append(cand)
        # Positions from the row's length on were clamped to padding.
        assert all(t == engine.format.specials.pad for t in cand.canvas[cand.length:])
        assert len(cand.token_ids) <= cand.length
    assert sorted(by_length) == [4, 8, 12] and all(len(v) == 2 for v in by_length.values())


def test_joint_segments_keep_the_known_text_between_holes(engine):
    known = "\n    total = "
    result = engine.fill(FillRequest("def f(a, b):\n    x = ", "\n    return total\n", segments=(5, known, 6)))
    cand = result.candidates[0]
    known_ids = engine.format.tokenizer(known, add_special_tokens=False)["input_ids"]
    assert cand.canvas[5 : 5 + len(known_ids)] == known_ids
    assert len(cand.holes) == 2
    assert cand.canvas[5 + len(known_ids) + 6] == engine.format.specials.end_of_middle


def test_renoise_changes_only_the_chosen_positions(engine):
    request = FillRequest(PREFIX, SUFFIX, seed=4)
    first = engine.fill(request).candidates[0]
    repaired = engine.renoise(request, first, [1, 2])
    changed = [i for i, (a, b) in enumerate(zip(first.canvas, repaired.canvas)) if a != b]
    assert set(changed) <= {1, 2}
    assert repaired.steps > first.steps


def test_chunked_prefill_builds_the_same_cache_as_one_pass(engine):
    from dg_engine.kvcache import PrefixCache

    assert engine.prefix_cache.chunk_size == 256  # the CPU default, chosen for peak memory
    ids = engine.format.infill_ids("def f(x):\n" + "    y = x + 1\n" * 40, "\n    return y\n")
    assert len(ids) > 64
    whole, chunked = PrefixCache(engine.model, chunk_size=4096), PrefixCache(engine.model, chunk_size=16)
    a, b = whole.prefill(ids).cache, chunked.prefill(ids).cache
    for la, lb in zip(a.layers, b.layers):
        assert la.keys.shape == lb.keys.shape
        assert torch.allclose(la.keys, lb.keys, atol=1e-5) and torch.allclose(la.values, lb.values, atol=1e-5)


def test_pinned_suffix_layout_keeps_the_suffix_in_the_canvas_and_out_of_the_prompt(engine, monkeypatch):
    from dg_engine.prompt import PINNED_TOKENS, PinnedFormat

    fim = engine.format
    monkeypatch.setattr(engine, "format", PinnedFormat(fim))
    prompt = engine.format.infill_ids(PREFIX, SUFFIX)
    assert fim.specials.fim_suffix not in prompt and fim.specials.fim_prefix not in prompt
    assert engine.format.tokenizer.decode(prompt[1:]) == PREFIX  # the prefix alone, as plain text
    calls = count_forwards(engine, monkeypatch)
    result = engine.fill(FillRequest(PREFIX, SUFFIX, n=2, lengths=(4, 8)))
    head = engine.format.suffix_head(SUFFIX)
    assert 0 < len(head) <= PINNED_TOKENS and set(calls) == {4}  # both lengths, two rows each, one batch
    for cand in result.candidates:
        k = cand.length
        assert k in (4, 8) and cand.canvas[k : k + len(head)] == head  # the suffix's head, pinned
        assert cand.canvas[k + len(head)] == fim.specials.end_of_middle and len(cand.token_ids) <= k
        assert cand.finished
    # The pinned layout is chosen by name, and refused where the tokenizer cannot support the asked one.
    from dg_engine.prompt import choose_format

    assert isinstance(choose_format(fim.tokenizer, requested="pinned"), PinnedFormat)
    with pytest.raises(ValueError, match="chat template"):
        choose_format(fim.tokenizer, requested="chat")
