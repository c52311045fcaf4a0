"""Encoder passes for rows that share one prompt: the beam's hypotheses without a cache per row.

The beam's hypotheses (`beam.py`) are a handful of rows that differ only in the few tokens each has
written after the prompt. Keeping them as rows of an ordinary cache means a copy of the prompt's
keys and values per row, made again by every reorder. Here the prompt's one-row cache is read in
place and each row keeps only its own tokens in a small cache of its own (`tails`); attention
scores a row's query against both and takes one softmax over the two. In 300-line files with a
full context window that took ghost text with a beam of three from p50 / p95 487 / 903 ms to
343 / 567 ms (`benchmarks/results/typing_beam_margin.json`, `typing_beam_shared.json`); the rest
is the beam's own passes.

It plugs into the model through transformers' own extension point: an attention function
registered with `AttentionInterface`, selected for the duration of one encoder pass, which is
given the prompt's layers as a keyword argument that the encoder hands down to its attention
layers. Every other part of the pass (projections, norms, rotary embedding, MLPs) is the model's.
The pass is one token per row, the newest, so every key is visible but those a sliding-window
layer has moved past.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from transformers import AttentionInterface, DynamicCache

NAME = "dg_shared_prefix"


def _attend(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask, scaling=None,
            sliding_window=None, shared_prefix=None, **_) -> tuple[torch.Tensor, None]:
    """`query` [K, H, 1, D] against the prompt's layer (keys, values: [1, G, L, D] each, G key
    heads) and each row's own `key`/`value` [K, G, T, D]; returns [K, 1, H, D] as sdpa does."""
    rows, heads, q_len, dim = query.shape
    assert q_len == 1, "shared-prefix attention takes the newest token of each row only"
    keys, values = shared_prefix[module.layer_idx]
    groups = keys.shape[1]
    if sliding_window:  # the window covers the newest `sliding_window` positions, this one included
        stored, tail = keys.shape[2], key.shape[2]
        drop = max(0, stored + tail - sliding_window)
        keys, values = keys[:, :, drop:], values[:, :, drop:]
    scale = dim**-0.5 if scaling is None else scaling
    q = query.reshape(rows, groups, heads // groups, dim)  # [K, G, H/G, D]
    on_prompt = torch.einsum("kgqd,gsd->kgqs", q, keys[0]) * scale  # [K, G, H/G, S]
    on_own = torch.einsum("kgqd,kgtd->kgqt", q, key) * scale  # [K, G, H/G, T]
    weights = torch.softmax(torch.cat([on_prompt, on_own], -1).float(), -1).to(query.dtype)
    split = on_prompt.shape[-1]
    out = torch.einsum("kgqs,gsd->kgqd", weights[..., :split], values[0])
    out = out + torch.einsum("kgqt,kgtd->kgqd", weights[..., split:], value)  # [K, G, H/G, D]
    return out.reshape(rows, heads, dim)[:, None], None  # [K, 1, H, D]


AttentionInterface.register(NAME, _attend)


def prompt_layers(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The prompt's one-row cache as the attention function reads it, without a copy."""
    return [(layer.keys, layer.values) for layer in cache.layers]


@contextmanager
def _selected(model):
    config = model.config.get_text_config()
    before = config._attn_implementation
    config._attn_implementation = NAME
    try:
        yield
    finally:
        config._attn_implementation = before


def encode_rows(model, prompt: list, tails: DynamicCache, tokens: torch.Tensor, position: int) -> torch.Tensor:
    """Encode one token per row (`tokens` [K]) at `position`, after the shared `prompt` (from
    `prompt_layers`) and each row's earlier tokens in `tails` [K rows], which this appends to;
    returns the hidden states [K, 1, H]."""
    input_ids = tokens[:, None].to(model.device)  # [K, 1]
    positions = torch.full_like(input_ids, position)  # [K, 1]
    # Visibility is the attention function's, so no mask is built: one per layer type, all None.
    masks = {kind: None for kind in set(model.config.get_text_config().layer_types)}
    with _selected(model):
        out = model.model.encoder(input_ids=input_ids, past_key_values=tails, position_ids=positions,
                                  attention_mask=masks, use_cache=True, shared_prefix=prompt)
    return out.last_hidden_state
