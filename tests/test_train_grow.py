"""Depth growth: the grown model starts as exactly the trained one and can still learn."""

from __future__ import annotations

import json

import pytest
import torch

from dg_engine.train.blocks import BlockBatch, block_diffusion_loss
from dg_engine.train.checkpoint import apply_state, save_checkpoint
from dg_engine.train.grow import LAYERS, GrowError, grow_state, layer_sources
from dg_engine.train.loop import TrainConfig, make_optimizer, optimizer_order
from dg_engine.train.model import build_model
from dg_engine.train.resume import load_resume, save_resume
from dg_engine.train.sequences import block_starts

VOCAB = 300


def _batch(seed: int) -> BlockBatch:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(8, VOCAB, (2, 16), generator=g)
    starts = torch.tensor([block_starts(0, 16, 4)] * 2)
    ones = torch.ones((2, 16))
    return BlockBatch(ids, torch.ones_like(ids, dtype=torch.bool), starts, ones, ones.bool())


def _loss(model, seed: int = 7) -> torch.Tensor:
    return block_diffusion_loss(model, _batch(1), torch.Generator().manual_seed(seed)).main


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """A tiny model after three training steps, its resume state, and that state grown to 3 layers."""
    root = tmp_path_factory.mktemp("grow")
    model = build_model("tiny", VOCAB, seed=0).train()
    cfg = TrainConfig(out=str(root / "run"), size="tiny")
    optimizer = make_optimizer(model, cfg)
    for step in range(3):
        optimizer.zero_grad()
        _loss(model, seed=step).backward()
        optimizer.step()
    save_checkpoint(root / "run", model, optimizer, {"step": 3, "seed": 0, "elapsed_s": 1.0, "config": {"size": "tiny"}})
    save_resume(root / "run", root / "state", ["--size", "tiny", "--lr", "1e-3"])
    grow_state(root / "state", 3, root / "grown")
    return model, root


def test_added_layers_follow_the_layer_they_copy():
    assert layer_sources(4, 6) == [(0, False), (0, True), (1, False), (2, False), (2, True), (3, False)]
    assert layer_sources(2, 3) == [(0, False), (0, True), (1, False)]
    assert layer_sources(2, 2) == [(0, False), (1, False)]
    with pytest.raises(GrowError):
        layer_sources(4, 3)


def test_the_grown_model_computes_the_same_loss_and_its_new_branches_learn(grown):
    model, root = grown
    deep = build_model("tiny", VOCAB, seed=1, layers=3).train()
    weights, flat, state = load_resume(root / "grown", deep)
    apply_state((weights, flat, state), deep, make_optimizer(deep, TrainConfig(out="", size="tiny")))
    assert deep.config.text_config.num_hidden_layers == 3
    with torch.no_grad():
        before, after = _loss(model), _loss(deep)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
    # The added layer (index 1) is a pass-through, yet its closing scales get a gradient.
    _loss(deep).backward()
    layer = deep.model.encoder.language_model.layers[1]
    assert layer.post_attention_layernorm.weight.abs().max() == 0
    assert layer.post_attention_layernorm.weight.grad.abs().max() > 0
    assert layer.post_feedforward_layernorm.weight.grad.abs().max() > 0


def test_the_grown_state_carries_moments_and_the_layers_option(grown):
    model, root = grown
    state = json.loads((root / "grown" / "state.json").read_text())
    assert state["argv"][-2:] == ["--layers", "3"] and state["step"] == 3
    deep = build_model("tiny", VOCAB, seed=0, layers=3)
    _, flat, _ = load_resume(root / "grown", deep)
    order = [n for n, _ in optimizer_order(deep)]
    moment = {n: flat[f"opt.{i}.exp_avg_sq"] for i, n in enumerate(order) if f"opt.{i}.exp_avg_sq" in flat}
    name = "self_attn.q_proj.weight"
    # The copy's moments are its source's; the layer after it is the old layer 1.
    assert torch.equal(moment[f"{LAYERS}1.{name}"], moment[f"{LAYERS}0.{name}"])
    old = dict(load_resume(root / "state", model)[1])
    old_order = [n for n, _ in optimizer_order(model)]
    old_moment = {n: old[f"opt.{i}.exp_avg_sq"] for i, n in enumerate(old_order) if f"opt.{i}.exp_avg_sq" in old}
    assert torch.equal(moment[f"{LAYERS}2.{name}"], old_moment[f"{LAYERS}1.{name}"])
    assert not torch.equal(moment[f"{LAYERS}2.{name}"], moment[f"{LAYERS}0.{name}"])


def test_growing_nothing_is_refused(tmp_path):
    with pytest.raises(GrowError, match="no training state"):
        grow_state(tmp_path / "none", 6, tmp_path / "out")


def test_a_state_over_its_budget_keeps_bf16_weights_and_resumes_in_fp32(grown, tmp_path):
    """A deeper model's state must still fit what is committed: its weights drop to bf16, its
    moments stay as they are, and the run continues from fp32 copies of the rounded weights."""
    model, root = grown
    exact = json.loads((root / "state" / "state.json").read_text())
    assert exact["weights_dtype"] == "float32"
    budget = (root / "state" / "optimizer.safetensors").stat().st_size + 1
    state = save_resume(root / "run", tmp_path / "small", ["--size", "tiny"], budget=budget)
    assert state["weights_dtype"] == "bfloat16"
    assert (tmp_path / "small" / "weights.safetensors").stat().st_size < (root / "state" / "weights.safetensors").stat().st_size * 0.6
    weights, flat, _ = load_resume(tmp_path / "small", model)
    _, exact_flat, _ = load_resume(root / "state", model)
    for name, p in model.named_parameters():
        assert weights[name].dtype == torch.float32
        assert torch.equal(weights[name], p.detach().to(torch.bfloat16).float())
    assert flat.keys() == exact_flat.keys() and all(torch.equal(flat[k], exact_flat[k]) for k in flat)


def test_open_branches_start_at_a_share_of_their_source_and_a_closed_state_opens_in_place(grown, tmp_path):
    """`--open S`: the added layers' closing scales are S times the scales of the layer they copy,
    so their weights learn from the first step; a state grown closed is opened at its own depth."""
    model, root = grown
    from dg_engine.train.grow import BRANCH_CLOSERS, grow_state

    state = grow_state(root / "state", 3, tmp_path / "open", open_share=0.25)
    assert state["grown_from"]["open_share"] == 0.25
    opened = dict(load_resume(tmp_path / "open", build_model("tiny", VOCAB, seed=0, layers=3))[0])
    closed = dict(load_resume(root / "grown", build_model("tiny", VOCAB, seed=0, layers=3))[0])
    for rest in BRANCH_CLOSERS:
        assert torch.equal(opened[f"{LAYERS}1.{rest}"], 0.25 * opened[f"{LAYERS}0.{rest}"])
        assert torch.count_nonzero(closed[f"{LAYERS}1.{rest}"]) == 0
    deep = build_model("tiny", VOCAB, seed=0, layers=3).train()
    with torch.no_grad():
        for name, p in deep.named_parameters():
            p.copy_(opened[name])
    _loss(deep).backward()
    q = deep.get_parameter(f"{LAYERS}1.self_attn.q_proj.weight")
    assert q.grad is not None and q.grad.abs().sum() > 0  # a closed copy's weights get none

    reopened = grow_state(root / "grown", 3, tmp_path / "reopened", open_share=0.25)
    assert reopened["grown_from"]["opened"] == {"share": 0.25, "step": 3}
    again = dict(load_resume(tmp_path / "reopened", build_model("tiny", VOCAB, seed=0, layers=3))[0])
    assert all(torch.equal(again[k], opened[k]) for k in opened)
    with pytest.raises(GrowError, match="--open"):
        grow_state(root / "grown", 3, tmp_path / "none")
