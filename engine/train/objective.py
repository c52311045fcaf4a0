"""Training objectives: DiffusionGemma's uniform-state diffusion loss and the AR baseline's loss.

Both run the same backbone. The diffusion loss encodes the prompt with the causal encoder (filling
a KV cache, as at inference), corrupts the clean canvas with uniformly random tokens at a sampled
noise level, and asks the bidirectional decoder to restore every canvas position. Both objectives
add a next-token loss on the prompt through the encoder's last hidden state: the encoder runs
anyway and shares the weights, so it is nearly free signal.

Batches are right-padded: real prompt tokens keep positions 0..len-1, so no query row is ever
fully masked (which would make NaNs under SDPA), and each canvas gets its own positions len..len+C
with the padded cache entries masked out of the decoder's attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from .examples import Example
from .model import UNCAPPED


@dataclass(frozen=True)
class ObjectiveConfig:
    """Knobs of the losses; see `diffusion_loss` for why each exists."""

    min_noise: float = 0.05
    pad_weight: float = 0.1
    self_conditioning_prob: float = 0.5
    aux_weight: float = 0.5
    canvas_draws: int = 1


@dataclass
class Batch:
    """Right-padded prompts and their clean canvases."""

    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L], 1 for real tokens
    position_ids: torch.Tensor  # [B, L]
    canvas: torch.Tensor  # [B, C]
    prompt_lengths: torch.Tensor  # [B]

    def _tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.input_ids, self.attention_mask, self.position_ids, self.canvas, self.prompt_lengths)

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(*(t.to(device) for t in self._tensors()))

    def repeat(self, k: int) -> "Batch":
        """Each row `k` times in a row, the layout of `DynamicCache.batch_repeat_interleave(k)`."""
        return Batch(*(t.repeat_interleave(k, dim=0) for t in self._tensors()))

    @property
    def num_tokens(self) -> int:
        return int(self.attention_mask.sum()) + self.canvas.numel()


@dataclass
class LossParts:
    """The total loss to optimise and its parts for logging."""

    total: torch.Tensor
    main: torch.Tensor  # diffusion canvas loss, or the AR loss on the middle
    aux: torch.Tensor  # next-token loss on the prompt


def _right_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids, mask


def collate(examples: list[Example], pad_id: int) -> Batch:
    """Tensors of a list of examples with equal canvas lengths."""
    ids, mask = _right_pad([e.prompt_ids for e in examples], pad_id)
    positions = torch.arange(ids.shape[1]).unsqueeze(0).expand_as(ids).contiguous()
    canvas = torch.tensor([e.canvas_ids for e in examples], dtype=torch.long)
    return Batch(ids, mask, positions, canvas, mask.sum(dim=1))


def softcapped_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The lm_head with the final logit softcapping the model applies to its own outputs."""
    cap = model.config.text_config.final_logit_softcapping
    logits = model.lm_head(hidden).float()
    if cap is None or cap >= UNCAPPED:
        return logits
    return torch.tanh(logits / cap) * cap


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of every position: logits [B, T, V], targets [B, T] -> [B, T].

    The logits are flattened rather than transposed to [B, V, T]: a softmax over the strided
    class dimension of the transposed view, and its conversion to fp32, took twice as long as
    over contiguous rows (measured on the CPU: 1.0-1.4 s against 0.5 s for a [4, 1024, 4096]
    batch with its backward), about a fifth of a training step."""
    b, t, v = logits.shape
    return F.cross_entropy(logits.reshape(b * t, v), targets.reshape(b * t), reduction="none").view(b, t)


def encode_prompt(model, batch: Batch) -> tuple[torch.Tensor, DynamicCache]:
    """Run the causal encoder over the prompts; returns its last hidden state and the KV cache."""
    cache = DynamicCache(config=model.config.get_text_config())
    out = model.model.encoder(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        past_key_values=cache,
        use_cache=True,
    )
    return out.last_hidden_state, cache  # [B, L, H]


def prompt_next_token_loss(model, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Mean next-token cross-entropy over real prompt positions that have a real successor."""
    logits = softcapped_logits(model, hidden[:, :-1])  # [B, L-1, V]
    targets = batch.input_ids[:, 1:]  # [B, L-1]
    valid = batch.attention_mask[:, 1:].bool()
    ce = token_cross_entropy(logits, targets)  # [B, L-1]
    return (ce * valid).sum() / valid.sum().clamp(min=1)


def canvas_weights(canvas: torch.Tensor, end_id: int, pad_weight: float) -> torch.Tensor:
    """1 up to and including <fim_end>, `pad_weight` on the padding after it."""
    is_end = (canvas == end_id).long()
    after_end = (torch.cumsum(is_end, dim=1) - is_end) > 0  # [B, C]
    pad = torch.full_like(canvas, pad_weight, dtype=torch.float)
    return torch.where(after_end, pad, torch.ones_like(pad))  # [B, C]


def noise_levels(rows: int, draws: int, generator: torch.Generator) -> torch.Tensor:
    """A noise level in [0, 1) per row; rows come in groups of `draws` copies of one example.

    With one draw per example the levels are independent uniforms. With several, each group gets
    one level from each of `draws` equal strata, so every example is seen at low, middle and high
    noise in the same step, the variance of the loss drops, and the full-noise canvases that start
    every fill at inference are never missing from a batch.
    """
    if draws == 1:
        return torch.rand(rows, 1, generator=generator)  # [B, 1]
    groups = rows // draws
    strata = torch.arange(draws, dtype=torch.float).repeat(groups)  # [B]
    return ((strata + torch.rand(rows, generator=generator)) / draws)[:, None]  # [B, 1]


def corrupt(canvas: torch.Tensor, vocab_size: int, min_noise: float, generator: torch.Generator,
            draws: int = 1) -> torch.Tensor:
    """Uniform-state noise: each position is replaced by a uniformly random token with prob. t."""
    b, c = canvas.shape
    t = min_noise + (1 - min_noise) * noise_levels(b, draws, generator)  # [B, 1]
    replace = torch.rand(b, c, generator=generator) < t  # [B, C]
    noise = torch.randint(0, vocab_size, (b, c), generator=generator)
    return torch.where(replace.to(canvas.device), noise.to(canvas.device), canvas)


def decode_canvas(model, cache, batch: Batch, noisy: torch.Tensor, sc_logits=None, sc_mask=None) -> torch.Tensor:
    """One decoder pass over the noisy canvases; returns softcapped logits [B, C, V]."""
    c = noisy.shape[1]
    decoder_mask = torch.cat([batch.attention_mask, torch.ones_like(noisy)], dim=1)  # [B, L+C]
    positions = batch.prompt_lengths[:, None] + torch.arange(c, device=noisy.device)[None, :]  # [B, C]
    return decoder_logits(model, cache, noisy, decoder_mask, positions, sc_logits, sc_mask)


def decoder_logits(model, cache, noisy: torch.Tensor, mask, positions: torch.Tensor, sc_logits=None,
                   sc_mask=None) -> torch.Tensor:
    """The decoder over `noisy` against the cache, with a 2D padding mask or per-layer 4D masks
    and explicit positions; returns softcapped logits [B, Q, V]."""
    out = model.model.decoder(
        decoder_input_ids=noisy,
        past_key_values=cache,
        self_conditioning_logits=sc_logits,
        self_conditioning_mask=sc_mask,
        decoder_attention_mask=mask,
        decoder_position_ids=positions,
    )
    return softcapped_logits(model, out.last_hidden_state)


def diffusion_loss(model, batch: Batch, end_id: int, generator: torch.Generator, cfg: ObjectiveConfig = ObjectiveConfig()) -> LossParts:
    """DiffusionGemma's objective plus the auxiliary prompt loss.

    The padding after <fim_end> is down-weighted: it is most of a short middle's canvas and trivially
    predictable once the end is placed, so at full weight it would drown the tokens that matter; it
    keeps a small weight because the sampler still has to settle those positions to padding.
    Self-conditioning is trained on a random half of the examples with a first, gradient-free pass,
    matching inference where every pass after the first sees the previous pass's logits.

    With `canvas_draws` k > 1, each prompt's canvas is corrupted k times at stratified noise levels
    and all k are restored against the one encoder pass: the prompt costs most of a step, so this
    buys k times the canvas signal for the price of the small decoder passes.
    """
    vocab = model.config.text_config.vocab_size
    hidden, cache = encode_prompt(model, batch)
    prompt_batch = batch
    if cfg.canvas_draws > 1:
        cache.batch_repeat_interleave(cfg.canvas_draws)
        batch = batch.repeat(cfg.canvas_draws)
    noisy = corrupt(batch.canvas, vocab, cfg.min_noise, generator, cfg.canvas_draws)  # [B*k, C]
    sc_mask = (torch.rand(batch.canvas.shape[0], generator=generator) < cfg.self_conditioning_prob).to(noisy.device)
    sc_logits = None
    if bool(sc_mask.any()):
        with torch.no_grad():
            sc_logits = decode_canvas(model, cache, batch, noisy).detach()
    logits = decode_canvas(model, cache, batch, noisy, sc_logits, sc_mask if sc_logits is not None else None)
    weights = canvas_weights(batch.canvas, end_id, cfg.pad_weight)  # [B, C]
    ce = token_cross_entropy(logits, batch.canvas)  # [B, C]
    main = (ce * weights).sum() / weights.sum()
    aux = prompt_next_token_loss(model, hidden, prompt_batch)
    return LossParts(main + cfg.aux_weight * aux, main, aux)


def ar_batch(examples: list[Example], pad_id: int, end_id: int) -> tuple[Batch, torch.Tensor]:
    """The AR baseline's sequences `prompt middle <fim_end>` and a mask of the middle targets."""
    rows, starts = [], []
    for e in examples:
        # The middle is the canvas without its padding: the same tokens the diffusion model learns.
        middle = [t for t in e.canvas_ids if t != pad_id]
        if end_id in middle:
            middle = middle[: middle.index(end_id) + 1]
        rows.append(e.prompt_ids + middle)
        starts.append(len(e.prompt_ids))
    ids, mask = _right_pad(rows, pad_id)
    positions = torch.arange(ids.shape[1]).unsqueeze(0).expand_as(ids).contiguous()
    target = torch.zeros_like(ids, dtype=torch.bool)
    for i, s in enumerate(starts):
        target[i, s : len(rows[i])] = True
    empty_canvas = torch.zeros((len(rows), 0), dtype=torch.long)
    return Batch(ids, mask, positions, empty_canvas, mask.sum(dim=1)), target


def ar_loss(model, batch: Batch, middle_mask: torch.Tensor, cfg: ObjectiveConfig = ObjectiveConfig()) -> LossParts:
    """Next-token loss on the middle and <fim_end>, plus the same auxiliary loss on the prompt."""
    hidden, _ = encode_prompt(model, batch)
    logits = softcapped_logits(model, hidden[:, :-1])  # [B, T-1, V]
    targets = batch.input_ids[:, 1:]
    ce = token_cross_entropy(logits, targets)  # [B, T-1]
    on_middle = middle_mask[:, 1:]
    in_prompt = batch.attention_mask[:, 1:].bool() & ~on_middle
    main = (ce * on_middle).sum() / on_middle.sum().clamp(min=1)
    aux = (ce * in_prompt).sum() / in_prompt.sum().clamp(min=1)
    return LossParts(main + cfg.aux_weight * aux, main, aux)
