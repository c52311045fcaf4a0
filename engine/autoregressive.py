"""Greedy autoregressive decoding through a DiffusionGemma model's causal encoder.

The AR baseline is the same backbone trained as a causal language model on `prompt middle
<fim_end>`. The benchmarks compare it with the diffusion decoder, so this module decodes it the
plain way: prefill the prompt into the encoder's KV cache, then one forward pass per new token.
It depends on torch and transformers only, so the benchmarks can use it without the server.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache


@dataclass
class ArTimings:
    """Wall-clock milliseconds of the prefill and of each single-token step."""

    prefill_ms: float = 0.0
    step_ms: list[float] = field(default_factory=list)

    @property
    def total_ms(self) -> float:
        return self.prefill_ms + sum(self.step_ms)


def head_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The next-token head's fp32 logits at every position of `hidden` [..., H], with the model's
    final softcapping: [..., V]."""
    logits = model.lm_head(hidden).float()
    cap = model.config.text_config.final_logit_softcapping
    return logits if cap is None else torch.tanh(logits / cap) * cap


def next_token_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """Logits of the last position [N, V] of `hidden` [N, T, H]."""
    return head_logits(model, hidden[:, -1])


@torch.inference_mode()
def ar_generate(
    model, prompt_ids: list[int], max_new_tokens: int, stop_ids: set[int], first: torch.Tensor | None = None
) -> tuple[list[int], int, ArTimings]:
    """Greedy decoding; returns (new ids without the stop token, forward passes, timings).
    `first` [K], if given, holds the only tokens the first may be (a healed prompt, `healing.py`)."""
    encoder = model.model.encoder
    device = next(model.parameters()).device
    cache = DynamicCache(config=model.config.get_text_config())
    timings = ArTimings()
    start = time.perf_counter()
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)  # [1, L]
    hidden = encoder(input_ids=ids, past_key_values=cache, use_cache=True).last_hidden_state
    passes = 1
    logits = next_token_logits(model, hidden)  # [1, V]
    token = int(logits.argmax(-1)) if first is None else int(first[logits[0, first].argmax()])
    timings.prefill_ms = (time.perf_counter() - start) * 1000
    generated: list[int] = []
    while token not in stop_ids and len(generated) < max_new_tokens:
        generated.append(token)
        if len(generated) == max_new_tokens:
            break
        start = time.perf_counter()
        step = torch.tensor([[token]], dtype=torch.long, device=device)  # [1, 1]
        hidden = encoder(input_ids=step, past_key_values=cache, use_cache=True).last_hidden_state
        passes += 1
        token = int(next_token_logits(model, hidden).argmax(-1))
        timings.step_ms.append((time.perf_counter() - start) * 1000)
    return generated, passes, timings
