"""Block-parallel training: every token of a sequence carries a loss in one step.

The one-canvas objective (`objective.diffusion_loss`) encodes a prompt of up to a thousand tokens to
train a 32-token canvas: about 3% of what a step processes carries the diffusion loss. Here a
whole sequence is cut into blocks, the way block-diffusion language models (BD3-LM) train:

1. one causal encoder pass over the clean sequence gives the next-token loss on every token and
   the KV cache of every position;
2. one decoder pass over a noised copy of the whole sequence gives the diffusion loss on every
   block, each noised token attending to the clean cache strictly before its block and, in both
   directions, to the noised tokens of its own block: exactly what it sees at inference, where
   the prompt is cached and the canvas is refined in place.

The model's own encoder, decoder and weights run unchanged (the decoder takes the 4D block mask
through `decoder_attention_mask` and each token's own position), so inference does not change.
A row describes its blocks with `block_start` (the first position of each token's block): a
suffix-first FIM row has its middle's blocks start right after `<fim_middle>`, so they line up
with the canvases the engine fills, while plain continuation is blocks from position 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from .objective import LossParts, ObjectiveConfig, softcapped_logits


@dataclass
class BlockBatch:
    """Right-padded clean sequences and how they are cut into blocks."""

    ids: torch.Tensor  # [B, T] clean tokens; padding after each row's end
    valid: torch.Tensor  # [B, T] bool: real tokens (a canvas's own padding after <fim_end> is real)
    block_start: torch.Tensor  # [B, T] long: first position of the token's block
    weights: torch.Tensor  # [B, T] float: diffusion-loss weight (0: the token is never noised)
    ntp: torch.Tensor  # [B, T] bool: the token is a next-token target (predicted from t-1)

    def _tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.ids, self.valid, self.block_start, self.weights, self.ntp)

    def to(self, device: torch.device | str) -> "BlockBatch":
        return BlockBatch(*(t.to(device) for t in self._tensors()))

    @property
    def num_tokens(self) -> int:
        """Real tokens in the batch: the tokens a step processes."""
        return int(self.valid.sum())

    @property
    def loss_tokens(self) -> int:
        """Tokens that carry a diffusion loss."""
        return int((self.weights > 0).sum())


def block_mask(block_start: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The decoder's attention mask over [clean cache | noised sequence]: [B, 1, T, 2T], True = attend.

    A noised token sees clean keys strictly before its block (never its own clean token, never a
    later block) and the noised keys of its own block. A padding position is its own block of one,
    so its row is never empty (an empty row is NaN under SDPA)."""
    t = block_start.shape[1]
    pos = torch.arange(t, device=block_start.device)
    clean = valid[:, None, :] & (pos[None, None, :] < block_start[:, :, None])  # [B, T, T]
    noised = block_start[:, :, None] == block_start[:, None, :]  # [B, T, T]
    return torch.cat([clean, noised], dim=-1)[:, None]  # [B, 1, T, 2T]


def noise_levels(block_start: torch.Tensor, min_noise: float, generator: torch.Generator) -> torch.Tensor:
    """One noise level per block, in [min_noise, 1): [B, T], equal within a block.

    A level per block rather than per sequence puts light and heavy noise in every row, so each
    step trains both the first steps of a fill (all noise) and its last ones (a few tokens left)."""
    u = torch.rand(block_start.shape, generator=generator).to(block_start.device)  # [B, T]
    per_block = torch.gather(u, 1, block_start)  # [B, T]
    return min_noise + (1 - min_noise) * per_block


def corrupt_blocks(batch: BlockBatch, vocab_size: int, min_noise: float, generator: torch.Generator) -> torch.Tensor:
    """Uniform-state noise on the tokens with a diffusion weight; the others stay clean: [B, T]."""
    t = noise_levels(batch.block_start, min_noise, generator)
    replace = (torch.rand(batch.ids.shape, generator=generator).to(t.device) < t) & (batch.weights > 0)
    noise = torch.randint(0, vocab_size, batch.ids.shape, generator=generator).to(batch.ids.device)
    return torch.where(replace, noise, batch.ids)


def encode_clean(model, batch: BlockBatch) -> tuple[torch.Tensor, DynamicCache, torch.Tensor]:
    """The causal encoder over the clean sequences: last hidden state [B, T, H], cache, positions."""
    positions = torch.arange(batch.ids.shape[1], device=batch.ids.device).expand_as(batch.ids)  # [B, T]
    cache = DynamicCache(config=model.config.get_text_config())
    out = model.model.encoder(
        input_ids=batch.ids,
        attention_mask=batch.valid.long(),
        position_ids=positions,
        past_key_values=cache,
        use_cache=True,
    )
    return out.last_hidden_state, cache, positions


def select_rows(cache: DynamicCache, rows: torch.Tensor, config) -> DynamicCache:
    """A new cache holding only some rows (detached), for the self-conditioning pass."""
    sub = DynamicCache(config=config)
    for i, layer in enumerate(cache.layers):
        sub.update(layer.keys[rows].detach(), layer.values[rows].detach(), i)
    return sub


def decode_blocks(model, cache, noisy: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
                  sc_logits: torch.Tensor | None = None, sc_mask: torch.Tensor | None = None) -> torch.Tensor:
    """One decoder pass over all noised blocks; returns softcapped logits [B, T, V]."""
    layer_masks = {kind: mask for kind in set(model.config.text_config.layer_types)}
    out = model.model.decoder(
        decoder_input_ids=noisy,
        past_key_values=cache,
        self_conditioning_logits=sc_logits,
        self_conditioning_mask=sc_mask,
        decoder_attention_mask=layer_masks,
        decoder_position_ids=positions,
    )
    return softcapped_logits(model, out.last_hidden_state)


def self_conditioning(model, cache, noisy, mask, positions, use: torch.Tensor) -> torch.Tensor | None:
    """Logits of a no-grad first pass for the rows that use self-conditioning (others zero).

    Only those rows are run, so self-conditioning half of the time costs half a decoder pass."""
    rows = use.nonzero().flatten()
    if rows.numel() == 0:
        return None
    with torch.no_grad():
        sub = select_rows(cache, rows, model.config.get_text_config())
        logits = decode_blocks(model, sub, noisy[rows], mask[rows], positions[rows])  # [b, T, V]
        full = logits.new_zeros((noisy.shape[0], *logits.shape[1:]))  # [B, T, V]
        full[rows] = logits
    return full


def next_token_loss(model, hidden: torch.Tensor, batch: BlockBatch) -> torch.Tensor:
    """Mean next-token cross-entropy on every target token."""
    logits = softcapped_logits(model, hidden[:, :-1])  # [B, T-1, V]
    ce = F.cross_entropy(logits.transpose(1, 2), batch.ids[:, 1:], reduction="none")  # [B, T-1]
    target = batch.ntp[:, 1:]
    return (ce * target).sum() / target.sum().clamp(min=1)


def block_diffusion_loss(model, batch: BlockBatch, generator: torch.Generator,
                         cfg: ObjectiveConfig = ObjectiveConfig(), noisy: torch.Tensor | None = None,
                         sc_use: torch.Tensor | None = None) -> LossParts:
    """DiffusionGemma's objective on every block of every row, plus the next-token loss.

    `noisy` and `sc_use` (which rows self-condition) are drawn from `generator` unless given, so a
    test can feed the one-canvas objective and this one the very same noise."""
    vocab = model.config.text_config.vocab_size
    hidden, cache, positions = encode_clean(model, batch)
    if noisy is None:
        noisy = corrupt_blocks(batch, vocab, cfg.min_noise, generator)  # [B, T]
    if sc_use is None:
        sc_use = (torch.rand(batch.ids.shape[0], generator=generator) < cfg.self_conditioning_prob).to(noisy.device)
    mask = block_mask(batch.block_start, batch.valid)  # [B, 1, T, 2T]
    sc_logits = self_conditioning(model, cache, noisy, mask, positions, sc_use)
    logits = decode_blocks(model, cache, noisy, mask, positions, sc_logits, sc_use if sc_logits is not None else None)
    ce = F.cross_entropy(logits.transpose(1, 2), batch.ids, reduction="none")  # [B, T]
    main = (ce * batch.weights).sum() / batch.weights.sum().clamp(min=1e-6)
    aux = next_token_loss(model, hidden, batch)
    return LossParts(main + cfg.aux_weight * aux, main, aux)


def block_ar_loss(model, batch: BlockBatch) -> LossParts:
    """The autoregressive baseline on the same rows: next-token loss on every token, encoder only."""
    hidden, _, _ = encode_clean(model, batch)
    loss = next_token_loss(model, hidden, batch)
    return LossParts(loss, loss, loss)
