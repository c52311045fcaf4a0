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
from transformers import DynamicCache

from .objective import LossParts, ObjectiveConfig, decoder_logits, softcapped_logits, token_cross_entropy


@dataclass
class BlockBatch:
    """Right-padded clean sequences and how they are cut into blocks."""

    ids: torch.Tensor  # [B, T] clean tokens; padding after each row's end
    valid: torch.Tensor  # [B, T] bool: real tokens (a canvas's own padding after <fim_end> is real)
    block_start: torch.Tensor  # [B, T] long: first position of the token's block
    weights: torch.Tensor  # [B, T] float: diffusion-loss weight (0: the token is never noised)
    ntp: torch.Tensor  # [B, T] bool: the token is a next-token target (predicted from t-1)
    # [B, T] long, edit traces only: the stale token standing at each position at inference, -1
    # where none does (see `edits.py`); None when no row of the batch has one.
    stale: torch.Tensor | None = None

    def _tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.ids, self.valid, self.block_start, self.weights, self.ntp)

    def to(self, device: torch.device | str) -> "BlockBatch":
        stale = None if self.stale is None else self.stale.to(device)
        return BlockBatch(*(t.to(device) for t in self._tensors()), stale=stale)

    @property
    def num_tokens(self) -> int:
        """Real tokens in the batch: the tokens a step processes."""
        return int(self.valid.sum())

    @property
    def loss_tokens(self) -> int:
        """Tokens that carry a diffusion loss."""
        return int((self.weights > 0).sum())


def block_mask(block_start: torch.Tensor, valid: torch.Tensor, lo: int = 0, hi: int | None = None) -> torch.Tensor:
    """The decoder's attention mask for the noised queries `lo:hi` over [clean cache :hi | noised lo:hi].

    [B, 1, Q, hi + Q] with Q = hi - lo, True = attend. A noised token sees clean keys strictly before
    its block (never its own clean token, never a later block) and the noised keys of its own block.
    A padding position is its own block of one, so its row is never empty (NaN under SDPA)."""
    hi = block_start.shape[1] if hi is None else hi
    starts = block_start[:, lo:hi]  # [B, Q]
    pos = torch.arange(hi, device=block_start.device)
    clean = valid[:, None, :hi] & (pos[None, None, :] < starts[:, :, None])  # [B, Q, hi]
    noised = starts[:, :, None] == starts[:, None, :]  # [B, Q, Q]
    return torch.cat([clean, noised], dim=-1)[:, None]  # [B, 1, Q, hi + Q]


def chunk_bounds(block_start: torch.Tensor, chunks: int) -> list[tuple[int, int, int, int]]:
    """Query chunks of the decoder pass: (lo, hi) to run, (keep_lo, keep_hi) to keep, per chunk.

    A chunk's queries need only the clean keys before `hi`, so running the sequence in chunks skips
    the masked-out part of the key range (four chunks: 44% of the attention of one pass). A chunk
    is widened to whole blocks on both sides (block starts are non-decreasing along a row), so every
    kept query sees all of its block; the widened margins are computed and dropped."""
    t = block_start.shape[1]
    edges = [round(i * t / chunks) for i in range(chunks + 1)]
    out = []
    for a, b in zip(edges, edges[1:]):
        if a == b:
            continue
        lo = int(block_start[:, a].min())
        last = block_start[:, b - 1 : b].contiguous()
        hi = int(torch.searchsorted(block_start.contiguous(), last, right=True).max())
        out.append((lo, hi, a, b))
    return out


def noise_levels(block_start: torch.Tensor, min_noise: float, generator: torch.Generator) -> torch.Tensor:
    """One noise level per block, in [min_noise, 1): [B, T], equal within a block.

    A level per block rather than per sequence puts light and heavy noise in every row, so each
    step trains both the first steps of a fill (all noise) and its last ones (a few tokens left)."""
    u = torch.rand(block_start.shape, generator=generator).to(block_start.device)  # [B, T]
    per_block = torch.gather(u, 1, block_start)  # [B, T]
    return min_noise + (1 - min_noise) * per_block


def corrupt_blocks(batch: BlockBatch, vocab_size: int, min_noise: float, generator: torch.Generator,
                   stale_prob: float = 0.5) -> torch.Tensor:
    """Uniform-state noise on the tokens with a diffusion weight; the others stay clean: [B, T].

    In `stale_prob` of the rows that have stale tokens (edit traces), every position not drawn for
    noise holds its stale token: the canvas looks as it does at inference, seeded with the text
    the edit made out of date, and the model learns to find and fix what no longer fits."""
    t = noise_levels(batch.block_start, min_noise, generator)
    replace = (torch.rand(batch.ids.shape, generator=generator).to(t.device) < t) & (batch.weights > 0)
    noise = torch.randint(0, vocab_size, batch.ids.shape, generator=generator).to(batch.ids.device)
    noisy = torch.where(replace, noise, batch.ids)
    if batch.stale is None:
        return noisy
    rows = (torch.rand(batch.ids.shape[0], generator=generator) < stale_prob).to(t.device)  # [B]
    use = rows[:, None] & (batch.stale >= 0) & ~replace & (batch.weights > 0)
    return torch.where(use, batch.stale, noisy)


def encode_clean(model, batch: BlockBatch) -> tuple[torch.Tensor, DynamicCache, torch.Tensor]:
    """The causal encoder over the clean sequences: last hidden state [B, T, H], cache, positions.

    No padding mask is passed: rows are right-padded, so a real token never sees a later pad under
    the causal mask, and without a mask SDPA runs its causal kernel, which skips the upper triangle.
    The decoder's mask keeps the pads' cache entries out."""
    positions = torch.arange(batch.ids.shape[1], device=batch.ids.device).expand_as(batch.ids)  # [B, T]
    cache = DynamicCache(config=model.config.get_text_config())
    out = model.model.encoder(input_ids=batch.ids, position_ids=positions, past_key_values=cache, use_cache=True)
    return out.last_hidden_state, cache, positions


def crop_rows(cache: DynamicCache, rows: torch.Tensor | None, end: int, config) -> DynamicCache:
    """A new cache of the first `end` positions of some rows (all rows when `rows` is None)."""
    sub = DynamicCache(config=config)
    for i, layer in enumerate(cache.layers):
        keys, values = layer.keys[..., :end, :], layer.values[..., :end, :]
        if rows is not None:
            keys, values = keys[rows], values[rows]
        sub.update(keys, values, i)
    return sub


def decode_blocks(model, cache, noisy: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
                  sc_logits: torch.Tensor | None = None, sc_mask: torch.Tensor | None = None) -> torch.Tensor:
    """One decoder pass over noised tokens with a ready mask; returns softcapped logits [B, Q, V]."""
    layer_masks = {kind: mask for kind in set(model.config.text_config.layer_types)}
    return decoder_logits(model, cache, noisy, layer_masks, positions, sc_logits, sc_mask)


def decode_all(model, cache, noisy: torch.Tensor, batch: BlockBatch, positions: torch.Tensor, chunks: int,
               rows: torch.Tensor | None = None, sc_logits=None, sc_mask=None) -> torch.Tensor:
    """The decoder over every block of the rows (`rows`: a subset), in query chunks: [b, T, V]."""
    config = model.config.get_text_config()
    starts, valid = batch.block_start, batch.valid
    if rows is not None:
        starts, valid, noisy, positions = starts[rows], valid[rows], noisy[rows], positions[rows]
    pieces = []
    for lo, hi, keep_lo, keep_hi in chunk_bounds(starts, chunks):
        sub = crop_rows(cache, rows, hi, config)
        sc = None if sc_logits is None else sc_logits[:, lo:hi]
        logits = decode_blocks(model, sub, noisy[:, lo:hi], block_mask(starts, valid, lo, hi), positions[:, lo:hi],
                               sc, sc_mask)
        pieces.append(logits[:, keep_lo - lo : keep_hi - lo])
    return torch.cat(pieces, dim=1)


def self_conditioning(model, cache, noisy, batch: BlockBatch, positions, use: torch.Tensor,
                      chunks: int) -> torch.Tensor | None:
    """Logits of a no-grad first pass for the rows that use self-conditioning (others zero).

    Only those rows are run, so self-conditioning half of the time costs half a decoder pass."""
    rows = use.nonzero().flatten()
    if rows.numel() == 0:
        return None
    with torch.no_grad():
        logits = decode_all(model, cache, noisy, batch, positions, chunks, rows=rows)  # [b, T, V]
        full = logits.new_zeros((noisy.shape[0], *logits.shape[1:]))  # [B, T, V]
        full[rows] = logits
    return full


def next_token_loss(model, hidden: torch.Tensor, batch: BlockBatch) -> torch.Tensor:
    """Mean next-token cross-entropy on every target token."""
    logits = softcapped_logits(model, hidden[:, :-1])  # [B, T-1, V]
    ce = token_cross_entropy(logits, batch.ids[:, 1:])  # [B, T-1]
    target = batch.ntp[:, 1:]
    return (ce * target).sum() / target.sum().clamp(min=1)


def block_diffusion_loss(model, batch: BlockBatch, generator: torch.Generator,
                         cfg: ObjectiveConfig = ObjectiveConfig(), noisy: torch.Tensor | None = None,
                         sc_use: torch.Tensor | None = None, chunks: int = 4) -> LossParts:
    """DiffusionGemma's objective on every block of every row, plus the next-token loss.

    `noisy` and `sc_use` (which rows self-condition) are drawn from `generator` unless given, so a
    test can feed the one-canvas objective and this one the very same noise."""
    vocab = model.config.text_config.vocab_size
    hidden, cache, positions = encode_clean(model, batch)
    if noisy is None:
        noisy = corrupt_blocks(batch, vocab, cfg.min_noise, generator)  # [B, T]
    if sc_use is None:
        sc_use = (torch.rand(batch.ids.shape[0], generator=generator) < cfg.self_conditioning_prob).to(noisy.device)
    sc_logits = self_conditioning(model, cache, noisy, batch, positions, sc_use, chunks)
    logits = decode_all(model, cache, noisy, batch, positions, chunks, sc_logits=sc_logits,
                        sc_mask=sc_use if sc_logits is not None else None)  # [B, T, V]
    ce = token_cross_entropy(logits, batch.ids)  # [B, T]
    main = (ce * batch.weights).sum() / batch.weights.sum().clamp(min=1e-6)
    aux = next_token_loss(model, hidden, batch)
    return LossParts(main + cfg.aux_weight * aux, main, aux)


def block_ar_loss(model, batch: BlockBatch) -> LossParts:
    """The autoregressive baseline on the same rows: next-token loss on every token, encoder only."""
    hidden, _, _ = encode_clean(model, batch)
    loss = next_token_loss(model, hidden, batch)
    return LossParts(loss, loss, loss)
