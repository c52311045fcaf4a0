"""Rows that share the prompt's cache (`dg_engine.shared_prefix`) encode as whole sequences do.

The reference is the plain encoder over the prompt and a row's tokens in one pass, with the model's
own masks: the shared path must agree with it on the tiny model and on a miniature of the released
model's structure (sliding-window layers whose window the prompt has outgrown, wider global heads
with fewer key heads), through reorders like the beam's."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from benchmarks import gpu
from dg_engine.shared_prefix import encode_rows, prompt_layers


@pytest.fixture(scope="module")
def windowed():
    model = gpu.materialise(gpu.build_config(gpu.SHAPE_TINY, 6, 16), torch.device("cpu"), torch.float32)
    model.config.get_text_config()._attn_implementation = "sdpa"
    return model


def last_hidden(model, ids: list[int]) -> torch.Tensor:
    """The plain encoder's last hidden state over `ids` [H]."""
    return model.model.encoder(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]


def prefill(model, ids: list[int]) -> DynamicCache:
    cache = DynamicCache(config=model.config.get_text_config())
    model.model.encoder(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
    return cache


@pytest.mark.parametrize("which, prompt_len", [("tiny", 30), ("windowed", 20), ("windowed", 45)])
@torch.inference_mode()
def test_shared_rows_match_the_plain_encoder_through_reorders(request, tiny, which, prompt_len):
    model = tiny[0] if which == "tiny" else request.getfixturevalue("windowed")
    gen = torch.Generator().manual_seed(prompt_len)
    prompt = torch.randint(8, 500, (prompt_len,), generator=gen).tolist()
    cache = prefill(model, prompt)
    kept = [layer.keys.clone() for layer in cache.layers]
    shared, tails = prompt_layers(cache), DynamicCache()
    rows = [[], [], []]
    for step in range(6):
        tokens = torch.randint(8, 500, (3,), generator=gen)
        for row, token in zip(rows, tokens.tolist()):
            row.append(token)
        hidden = encode_rows(model, shared, tails, tokens, prompt_len + step)  # [3, 1, H]
        for k, row in enumerate(rows):
            torch.testing.assert_close(hidden[k, 0], last_hidden(model, prompt + row), atol=1e-4, rtol=1e-4)
        order = [2, 0, 0] if step % 2 == 0 else [1, 2, 0]  # a beam's survivors: rows dropped and repeated
        tails.reorder_cache(torch.tensor(order))
        rows = [list(rows[i]) for i in order]
    # The windowed model's layers need their window: at 45 tokens its sliding layers hold 31 of the
    # prompt's keys, and the rows' later tokens must not see the oldest of them.
    assert all(torch.equal(a, layer.keys) for a, layer in zip(kept, cache.layers))


def test_the_models_attention_is_its_own_again_after_a_pass_even_one_that_fails(tiny):
    model = tiny[0]
    config = model.config.get_text_config()
    before = config._attn_implementation
    cache = prefill(model, [5, 6, 7, 8])
    encode_rows(model, prompt_layers(cache), DynamicCache(), torch.tensor([9, 10]), 4)
    assert config._attn_implementation == before
    with pytest.raises(Exception):
        encode_rows(model, prompt_layers(cache)[:1], DynamicCache(), torch.tensor([9, 10]), 4)  # a layer short
    assert config._attn_implementation == before
