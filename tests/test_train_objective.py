"""The training objectives: padding-invariant batching, finite losses that fall when overfitting."""

from __future__ import annotations

import pytest
import torch

from dg_engine.train.model import build_model
from dg_engine.train.objective import (
    ObjectiveConfig,
    ar_batch,
    ar_loss,
    canvas_weights,
    collate,
    decode_canvas,
    diffusion_loss,
    encode_prompt,
    noise_levels,
)


@pytest.fixture(scope="module")
def setup(fim_source):
    src, fmt = fim_source
    return src, fmt, len(fmt.tokenizer)


def test_padded_batch_matches_unbatched(setup):
    src, fmt, vocab = setup
    model = build_model("tiny", vocab, seed=0).eval()
    examples = src.batch_examples(seed=0, step=0, batch_size=4)
    assert len({len(e.prompt_ids) for e in examples}) > 1
    batch = collate(examples, fmt.specials.pad)
    with torch.no_grad():
        hidden, cache = encode_prompt(model, batch)
        logits = decode_canvas(model, cache, batch, batch.canvas)  # [B, C, V]
        sc = decode_canvas(model, cache, batch, batch.canvas, logits, torch.ones(4, dtype=torch.bool))
        for i, e in enumerate(examples):
            one = collate([e], fmt.specials.pad)
            h1, c1 = encode_prompt(model, one)
            l1 = decode_canvas(model, c1, one, one.canvas)
            s1 = decode_canvas(model, c1, one, one.canvas, l1, torch.ones(1, dtype=torch.bool))
            n = len(e.prompt_ids)
            torch.testing.assert_close(h1[0], hidden[i, :n], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(l1[0], logits[i], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(s1[0], sc[i], atol=1e-4, rtol=1e-4)
        # The hand-driven encoder/decoder equals the model's own forward on a single example.
        one = collate([examples[0]], fmt.specials.pad)
        reference = model(input_ids=one.input_ids, decoder_input_ids=one.canvas).logits
        torch.testing.assert_close(reference[0], logits[0], atol=1e-4, rtol=1e-4)


def test_canvas_weights_down_weight_padding_after_end():
    canvas = torch.tensor([[10, 11, 6, 0, 0], [10, 11, 12, 13, 14]])
    w = canvas_weights(canvas, end_id=6, pad_weight=0.1)
    torch.testing.assert_close(w, torch.tensor([[1, 1, 1, 0.1, 0.1], [1, 1, 1, 1, 1]]))


@pytest.mark.parametrize("objective", ["diffusion", "ar"])
def test_loss_finite_and_decreases_when_overfitting(setup, objective):
    src, fmt, vocab = setup
    model = build_model("tiny", vocab, seed=0).train()
    examples = src.batch_examples(seed=1, step=0, batch_size=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    pad, end = fmt.specials.pad, fmt.specials.end_of_middle
    losses = []
    for step in range(20):
        if objective == "ar":
            batch, middle = ar_batch(examples, pad, end)
            parts = ar_loss(model, batch, middle)
        else:
            generator = torch.Generator().manual_seed(step)
            parts = diffusion_loss(model, collate(examples, pad), end, generator, ObjectiveConfig())
        assert torch.isfinite(parts.total) and torch.isfinite(parts.main) and torch.isfinite(parts.aux)
        optimizer.zero_grad()
        parts.total.backward()
        optimizer.step()
        losses.append(parts.total.item())
    assert sum(losses[-3:]) / 3 < 0.8 * sum(losses[:3]) / 3, losses


def test_noise_levels_stratified_per_example():
    draws, groups = 4, 50
    levels = noise_levels(draws * groups, draws, torch.Generator().manual_seed(0)).view(groups, draws)  # [G, k]
    strata = (levels * draws).floor().long()
    # Every example gets exactly one level in each quarter of [0, 1), in order.
    assert torch.equal(strata, torch.arange(draws).expand(groups, draws))
    # One draw keeps plain independent uniforms, so runs without draws resume bit-exactly.
    torch.testing.assert_close(noise_levels(6, 1, torch.Generator().manual_seed(3)),
                               torch.rand(6, 1, generator=torch.Generator().manual_seed(3)))


def test_canvas_draws_restore_copies_against_one_prompt_pass(setup):
    src, fmt, vocab = setup
    model = build_model("tiny", vocab, seed=0).eval()
    examples = src.batch_examples(seed=2, step=0, batch_size=3)
    batch = collate(examples, fmt.specials.pad)
    pad, end = fmt.specials.pad, fmt.specials.end_of_middle
    with torch.no_grad():
        # The repeated batch lines up with the repeated cache: each copy decodes as its original.
        _, cache = encode_prompt(model, batch)
        once = decode_canvas(model, cache, batch, batch.canvas)  # [B, C, V]
        cache.batch_repeat_interleave(2)
        twice = decode_canvas(model, cache, batch.repeat(2), batch.repeat(2).canvas)  # [2B, C, V]
        torch.testing.assert_close(twice[0::2], once, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(twice[1::2], once, atol=1e-5, rtol=1e-5)
        one = diffusion_loss(model, batch, end, torch.Generator().manual_seed(0), ObjectiveConfig())
        four = diffusion_loss(model, batch, end, torch.Generator().manual_seed(0), ObjectiveConfig(canvas_draws=4))
    # The prompt loss is over the prompts once, whatever the number of canvas draws.
    torch.testing.assert_close(four.aux, one.aux)
    assert torch.isfinite(four.main) and not torch.equal(four.main, one.main)
