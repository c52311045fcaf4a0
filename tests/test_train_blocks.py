"""The block-parallel objective: what each noised token may see, and agreement with one canvas."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dg_engine.train.blocks import (BlockBatch, block_diffusion_loss, block_mask, chunk_bounds, corrupt_blocks,
                                    decode_all, encode_clean)
from dg_engine.train.examples import ExampleSource
from dg_engine.train.model import build_model
from dg_engine.train.objective import canvas_weights, collate, decode_canvas, encode_prompt
from dg_engine.train.sequences import BlockSource, MixConfig, block_starts, canvas_batch, collate_rows, fim_row


@pytest.fixture(scope="module")
def setup(fim_source):
    src, fmt = fim_source
    return src, fmt, build_model("tiny", len(fmt.tokenizer), seed=0).eval()


def test_mask_sees_only_earlier_blocks_and_its_own():
    starts = torch.tensor([block_starts(0, 6, 2) + [6, 7]])  # blocks {0,1} {2,3} {4,5}, padding 6 and 7
    valid = torch.tensor([[True] * 6 + [False, False]])
    mask = block_mask(starts, valid)[0, 0]  # [T, 2T]
    clean, noised = mask[:, :8], mask[:, 8:]
    for q in range(8):
        for k in range(8):
            # Clean keys: real and strictly before the query's block; its own clean token never.
            assert bool(clean[q, k]) == (k < int(starts[0, q]) and k < 6)
            assert bool(noised[q, k]) == (int(starts[0, q]) == int(starts[0, k]))
    assert not clean.diagonal().any()


def _random_batch(vocab: int, size: int = 4, length: int = 12) -> BlockBatch:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(8, vocab, (2, length), generator=g)
    starts = torch.tensor([block_starts(0, length, size)] * 2)
    ones = torch.ones((2, length))
    return BlockBatch(ids, torch.ones_like(ids, dtype=torch.bool), starts, ones, ones.bool())


def test_a_block_never_depends_on_its_clean_tokens_or_later_blocks(setup):
    _, _, model = setup
    vocab = model.config.text_config.vocab_size
    batch = _random_batch(vocab)
    noisy = corrupt_blocks(batch, vocab, 0.5, torch.Generator().manual_seed(1))

    def logits_for(ids: torch.Tensor, noised: torch.Tensor, chunks: int = 1) -> torch.Tensor:
        changed = BlockBatch(ids, batch.valid, batch.block_start, batch.weights, batch.ntp)
        with torch.no_grad():
            _, cache, positions = encode_clean(model, changed)
            return decode_all(model, cache, noised, changed, positions, chunks)

    base = logits_for(batch.ids, noisy)
    # Query chunks skip masked keys only: the logits are the same as in one pass.
    for chunks in (2, 3, 5):
        torch.testing.assert_close(logits_for(batch.ids, noisy, chunks), base, atol=1e-5, rtol=1e-5)
    # Change the clean tokens of block 1 (positions 4..7) and everything after it.
    ids = batch.ids.clone()
    ids[:, 4:] = (ids[:, 4:] + 1) % vocab
    after = logits_for(ids, noisy)
    torch.testing.assert_close(after[:, :8], base[:, :8])  # blocks 0 and 1 see none of it
    assert not torch.allclose(after[:, 8:], base[:, 8:])  # block 2 sees block 1's clean tokens
    # Change the noised tokens of block 2: only block 2 moves.
    noised = noisy.clone()
    noised[:, 8:] = (noised[:, 8:] + 1) % vocab
    moved = logits_for(batch.ids, noised)
    torch.testing.assert_close(moved[:, :8], base[:, :8])
    assert not torch.allclose(moved[:, 8:], base[:, 8:])


@pytest.mark.parametrize("self_condition,chunks", [(False, 1), (True, 1), (True, 3)])
def test_one_canvas_loss_equals_the_old_objective(setup, self_condition, chunks):
    src, fmt, model = setup
    s = fmt.specials
    examples = src.batch_examples(seed=3, step=0, batch_size=3)
    old = collate(examples, s.pad)
    new = canvas_batch(examples, s.pad, s.end_of_middle)
    g = torch.Generator().manual_seed(5)
    noisy_canvas = torch.randint(0, model.config.text_config.vocab_size, old.canvas.shape, generator=g)
    use = torch.full((3,), self_condition)
    with torch.no_grad():
        # The old one-canvas loss, as objective.diffusion_loss computes it, with this noise.
        _, cache = encode_prompt(model, old)
        sc = decode_canvas(model, cache, old, noisy_canvas) if self_condition else None
        logits = decode_canvas(model, cache, old, noisy_canvas, sc, use if self_condition else None)
        w = canvas_weights(old.canvas, s.end_of_middle, 0.1)
        ce = F.cross_entropy(logits.transpose(1, 2), old.canvas, reduction="none")
        expected = (ce * w).sum() / w.sum()
        # The same noise laid into the block rows: prompt clean, canvas right after it.
        noisy = new.ids.clone()
        for i, e in enumerate(examples):
            p = len(e.prompt_ids)
            noisy[i, p : p + old.canvas.shape[1]] = noisy_canvas[i]
        parts = block_diffusion_loss(model, new, torch.Generator().manual_seed(0), noisy=noisy, sc_use=use,
                                     chunks=chunks)
    torch.testing.assert_close(parts.main, expected, atol=1e-5, rtol=1e-5)


def test_fim_rows_align_middle_blocks_with_the_canvas(setup):
    src, fmt, _ = setup
    s = fmt.specials
    example = src.sample(random.Random(0), 32)
    row = fim_row(example, 16, s.end_of_middle, s.pad, MixConfig(), prompt_blocks=True)
    p = len(example.prompt_ids)
    assert row.ids[:p] == example.prompt_ids
    assert row.block_start[p] == p  # the middle's first block starts after <fim_middle>
    assert s.end_of_middle in row.ids[p:] or len(row.ids) - p == 32
    assert len(row.ids) - p in (16, 32)
    assert all(w == 1.0 for w in row.weights[:p])


def test_middle_weight_scales_only_the_middle(setup):
    src, fmt, _ = setup
    s = fmt.specials
    example = src.sample(random.Random(0), 32)
    plain = fim_row(example, 16, s.end_of_middle, s.pad, MixConfig(), prompt_blocks=True)
    heavy = fim_row(example, 16, s.end_of_middle, s.pad, MixConfig(middle_weight=3.0), prompt_blocks=True)
    p = len(example.prompt_ids)
    assert heavy.weights[:p] == plain.weights[:p]
    assert heavy.weights[p:] == pytest.approx([3.0 * w for w in plain.weights[p:]])
    # The padding after <fim_end> keeps its share of the middle's weight.
    assert min(heavy.weights[p:]) < max(heavy.weights[p:]) or s.end_of_middle not in example.canvas_ids[:-1]


def test_mixed_batches_are_reproducible_and_mostly_loss_tokens(setup):
    src, fmt, model = setup
    code = np.random.default_rng(0).integers(8, 400, 5000).astype(np.uint16)
    source = BlockSource(src, code, code[::-1].copy(), MixConfig(seq_len=64, block_sizes=(16,), block_weights=(1.0,)))
    a, b = source.batch(0, 7, 6), source.batch(0, 7, 6)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.block_start, b.block_start)
    assert a.loss_tokens / a.num_tokens > 0.9
    parts = block_diffusion_loss(model, a, torch.Generator().manual_seed(0))
    assert torch.isfinite(parts.total)
    parts.total.backward()
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
    model.zero_grad(set_to_none=True)


def test_the_trainers_aux_weight_sets_the_next_token_losss_share(setup):
    from dg_engine.train.loop import TrainConfig, step_loss

    src, fmt, model = setup
    code = np.random.default_rng(1).integers(8, 400, 3000).astype(np.uint16)
    source = BlockSource(src, code, None, MixConfig(seq_len=64, block_sizes=(16,), block_weights=(1.0,)))
    with torch.no_grad():
        plain, _, _ = step_loss(model, source, TrainConfig(out="unused", batch_size=2), 3, 0, "cpu")
        heavy, _, _ = step_loss(model, source, TrainConfig(out="unused", batch_size=2, aux_weight=2.0), 3, 0, "cpu")
    # The same batch and noise: only the next-token loss's weight differs.
    torch.testing.assert_close(heavy.main, plain.main)
    torch.testing.assert_close(plain.total, plain.main + 0.5 * plain.aux)
    torch.testing.assert_close(heavy.total, heavy.main + 2.0 * heavy.aux)


def test_padding_is_never_trained(setup):
    src, fmt, _ = setup
    s = fmt.specials
    e = src.sample(random.Random(1), 16)
    batch = collate_rows([fim_row(e, 16, s.end_of_middle, s.pad, MixConfig(), True)], s.pad, seq_len=len(e.prompt_ids) + 40)
    tail = ~batch.valid[0]
    assert tail.sum() > 0
    assert (batch.weights[0][tail] == 0).all() and not batch.ntp[0][tail].any()


def test_chunks_are_widened_to_whole_blocks():
    # Row 0: blocks of 4 from 0; row 1: a 5-token prompt of one-token blocks, then blocks of 4.
    starts = torch.tensor([block_starts(0, 12, 4), list(range(5)) + block_starts(5, 7, 4)])
    bounds = chunk_bounds(starts, 2)
    assert [(keep_lo, keep_hi) for _, _, keep_lo, keep_hi in bounds] == [(0, 6), (6, 12)]
    (lo0, hi0, _, _), (lo1, hi1, _, _) = bounds
    # Position 5 starts row 1's block 5..8 and row 0's block 4..7, so chunk 0 runs to 9, chunk 1 from 4.
    assert (lo0, hi0, lo1, hi1) == (0, 9, 4, 12)


def test_short_fim_rows_are_packed_with_code(setup):
    src, fmt, _ = setup
    code = np.random.default_rng(1).integers(8, 400, 5000).astype(np.uint16)
    mix = MixConfig(seq_len=400, fim_share=1.0, prose_share=0.0, block_sizes=(16,), block_weights=(1.0,))
    batch = BlockSource(src, code, None, mix).batch(0, 3, 4)
    assert batch.ids.shape[1] >= 400 and batch.valid.sum(dim=1).min() >= 400 - 16
    sep = fmt.specials.file_separator
    for row in range(4):
        ids = batch.ids[row].tolist()
        at = ids.index(sep, ids.index(fmt.specials.fim_middle))
        # The packed code starts a block of its own after the separator.
        assert int(batch.block_start[row, at + 1]) == at + 1


def test_fim_rows_pack_several_holes_before_any_code(setup):
    base, fmt, _ = setup
    s = fmt.specials
    # No middle typed so far, so each middle starts right after its <fim_middle>.
    src = ExampleSource(base.sources, fmt, replace(base.config, middle_so_far_prob=0.0))
    special = {t for t in vars(s).values() if isinstance(t, int)}
    code = np.array([t for t in np.random.default_rng(2).integers(0, 400, 6000) if t not in special][:5000], np.uint16)
    mix = MixConfig(seq_len=600, fim_share=1.0, prose_share=0.0, edit_share=0.0, block_sizes=(16,),
                    block_weights=(1.0,), fim_per_row=3)
    batch = BlockSource(src, code, None, mix).batch(0, 5, 6)
    holes = []
    for row in range(6):
        ids, starts = batch.ids[row].tolist(), batch.block_start[row].tolist()
        middles = [i for i, t in enumerate(ids) if t == s.fim_middle]
        holes.append(len(middles))
        for at in middles:
            # Each hole's middle starts a block right after its sentinel.
            assert starts[at + 1] == at + 1
        for at in middles[1:]:
            # A packed hole is another file: a separator comes between it and what was before.
            assert s.file_separator in ids[middles[0] : at]
    assert max(holes) == 3 and min(holes) >= 2, holes
    ends = sum((batch.ids[r] == s.end_of_middle).sum().item() for r in range(6))
    assert ends >= sum(holes) // 2  # most middles end inside their blocks, so the end is learnt
    one = BlockSource(src, code, None, replace(mix, fim_per_row=1)).batch(0, 5, 6)
    assert all((one.ids[r] == s.fim_middle).sum() == 1 for r in range(6))


def test_no_row_is_longer_than_the_row_length(setup):
    src, fmt, _ = setup
    code = np.random.default_rng(3).integers(8, 400, 5000).astype(np.uint16)
    # Prompts of up to 256 tokens cannot fit rows of 120: such holes give way to code windows.
    mix = MixConfig(seq_len=120, fim_share=1.0, prose_share=0.0, edit_share=0.0, block_sizes=(16,), block_weights=(1.0,))
    for step in range(6):
        batch = BlockSource(src, code, None, mix).batch(0, step, 4)
        assert batch.ids.shape[1] <= 120
