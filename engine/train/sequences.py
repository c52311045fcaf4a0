"""Training rows for the block-parallel objective: FIM holes, code and prose, cut into blocks.

Four kinds of row share one batch, each a whole sequence whose every token carries a loss:

* a suffix-first FIM example (`ExampleSource`, the editor-shaped holes the engine is asked to
  fill) laid out as `prompt | middle blocks`: the middle's blocks start right after
  `<fim_middle>`, as the engine's canvases do, and end with `<fim_end>` and padding;
* a window of the code stream (plain continuation: blocks from position 0);
* a window of the prose stream (documentation paragraphs, for the paragraph rewrite);
* an edit trace (`edits.py`): recent edits as chunks, a window as the middle, its stale tokens
  kept for the noise (next-edit suggestions).

Everything a step draws comes from a `random.Random` seeded by (seed, step), so a resumed run
sees the batches an uninterrupted one would have.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from .blocks import BlockBatch
from .edits import EditSource
from .examples import Example, ExampleSource
from .objective import canvas_weights


@dataclass(frozen=True)
class MixConfig:
    """What a batch is made of; the defaults are the long run's."""

    seq_len: int = 1024
    block_sizes: tuple[int, ...] = (16, 32, 64)
    block_weights: tuple[float, ...] = (0.25, 0.5, 0.25)
    fim_share: float = 0.6
    prose_share: float = 0.1
    edit_share: float = 0.1
    max_middle_blocks: int = 2
    # Next-edit windows are longer than a hole: up to about 16 lines.
    max_edit_tokens: int = 160
    # The FIM prompt's own blocks are denoised too: they are code like any other, and otherwise
    # the decoder's pass over them would be spent for nothing.
    prompt_blocks: bool = True
    pad_weight: float = 0.1
    # Holes per FIM row: a hole's prompt and middle take a few hundred of a row's 1,024 tokens, and
    # with one per row the middles carried about 2% of the diffusion loss, so the model learnt
    # code but not where a middle ends (it closed a held-out middle a fifth of the time, the
    # one-canvas model three times as often). Further holes from other files fill the room first.
    fim_per_row: int = 3
    # The diffusion-loss weight of a FIM middle's tokens, against 1 for code. Even with three
    # holes a row, a model trained 3,000 steps guessed the first token of a held-out middle from
    # an all-noise canvas far less often than its own next-token head did (14% against 19%), while
    # on plain continuation its decoder was close to that head: the decoder had learnt code, not
    # how a middle joins its prefix to its suffix.
    middle_weight: float = 1.0


@dataclass
class Row:
    """One sequence before collation: tokens, block starts, diffusion weights."""

    ids: list[int]
    block_start: list[int]
    weights: list[float]
    stale: list[int] | None = None  # edit traces: the stale token at each position, -1 for none


def block_starts(start: int, length: int, size: int) -> list[int]:
    """Block starts of `length` tokens cut into blocks of `size` from position `start`."""
    return [start + (i // size) * size for i in range(length)]


def stream_row(tokens: np.ndarray, rng: random.Random, seq_len: int, size: int) -> Row:
    """A window of a token stream, all of it in blocks from position 0."""
    start = rng.randrange(max(1, len(tokens) - seq_len))
    ids = tokens[start : start + seq_len].astype(np.int64).tolist()
    return Row(ids, block_starts(0, len(ids), size), [1.0] * len(ids))


def fim_row(example: Example, size: int, end_id: int, pad_id: int, cfg: MixConfig, prompt_blocks: bool) -> Row:
    """`prompt | middle blocks`; middle blocks past the one holding `<fim_end>` are dropped."""
    canvas = example.canvas_ids
    blocks = [canvas[i : i + size] for i in range(0, len(canvas), size)]
    keep = next((k + 1 for k, b in enumerate(blocks) if end_id in b), len(blocks))
    middle = [t for b in blocks[:keep] for t in b]
    prompt = example.prompt_ids
    weights = (canvas_weights(torch.tensor([middle]), end_id, cfg.pad_weight)[0] * cfg.middle_weight).tolist()
    if prompt_blocks:
        starts = block_starts(0, len(prompt), size)
        prompt_weights = [1.0] * len(prompt)
    else:
        starts = list(range(len(prompt)))  # never noised: each its own block
        prompt_weights = [0.0] * len(prompt)
    stale = None if example.stale_ids is None else [-1] * len(prompt) + example.stale_ids[: len(middle)]
    return Row(prompt + middle, starts + block_starts(len(prompt), len(middle), size), prompt_weights + weights,
               stale)


def collate_rows(rows: list[Row], pad_id: int, seq_len: int | None = None) -> BlockBatch:
    """Right-pad rows into a `BlockBatch`; padding positions are blocks of one, never trained."""
    width = seq_len or max(len(r.ids) for r in rows)
    b = len(rows)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    valid = torch.zeros((b, width), dtype=torch.bool)
    starts = torch.arange(width).repeat(b, 1)
    weights = torch.zeros((b, width))
    for i, r in enumerate(rows):
        n = min(len(r.ids), width)
        ids[i, :n] = torch.tensor(r.ids[:n])
        valid[i, :n] = True
        starts[i, :n] = torch.tensor(r.block_start[:n])
        weights[i, :n] = torch.tensor(r.weights[:n])
    # A canvas's padding after <fim_end> is a diffusion target but not text to continue.
    ntp = valid & (ids != pad_id)
    stale = None
    if any(r.stale is not None for r in rows):
        stale = torch.full((b, width), -1, dtype=torch.long)
        for i, r in enumerate(rows):
            if r.stale is not None:
                n = min(len(r.stale), width)
                stale[i, :n] = torch.tensor(r.stale[:n])
    return BlockBatch(ids, valid, starts, weights, ntp, stale)


class BlockSource:
    """Draws block-parallel batches from FIM holes and the code and prose streams."""

    def __init__(self, fim: ExampleSource, code: np.ndarray | None, prose: np.ndarray | None,
                 config: MixConfig = MixConfig(), edits: EditSource | None = None):
        self.fim, self.code, self.prose, self.config, self.edits = fim, code, prose, config, edits
        self.fmt = fim.fmt

    def _kind(self, rng: random.Random) -> str:
        cfg, r = self.config, rng.random()
        if r < cfg.fim_share or (self.code is None and self.prose is None):
            return "fim"
        if r < cfg.fim_share + cfg.prose_share and self.prose is not None:
            return "prose"
        if r < cfg.fim_share + cfg.prose_share + cfg.edit_share and self.edits is not None:
            return "edit"
        return "code" if self.code is not None else "prose"

    def row(self, rng: random.Random, size: int) -> Row:
        """One row of at most `seq_len` tokens (a batch is as wide as its widest row, and one row
        nine times too long once took a training process to 20 GB); an example too long for a row
        gives way to a window of code."""
        row = self._row(rng, size)
        if len(row.ids) > self.config.seq_len and self.code is not None:
            return stream_row(self.code, rng, self.config.seq_len, size)
        return row

    def _row(self, rng: random.Random, size: int) -> Row:
        cfg, s = self.config, self.fmt.specials
        kind = self._kind(rng)
        if kind == "edit":
            # Room for the longest window: its tokens, <fim_end>, and padding to a whole block.
            room = cfg.seq_len - (cfg.max_edit_tokens // size + 1) * size
            example = self.edits.sample(rng, cfg.max_edit_tokens, size, max_prompt_tokens=room)
            if example is not None:
                row = fim_row(example, size, s.end_of_middle, s.pad, cfg, cfg.prompt_blocks)
                return self._packed(row, rng, size)
            kind = "fim"  # no file of this draw had an edit of the drawn kinds
        if kind == "fim":
            example = self.fim.sample(rng, size * cfg.max_middle_blocks)
            return self._packed(fim_row(example, size, s.end_of_middle, s.pad, cfg, cfg.prompt_blocks), rng, size)
        stream = self.code if kind == "code" else self.prose
        return stream_row(stream, rng, cfg.seq_len, size)

    def _packed(self, row: Row, rng: random.Random, size: int) -> Row:
        """A FIM row filled up to `seq_len`: more holes (up to `fim_per_row` in all), then a window
        of code, each after a file separator.

        Editor-sized prompts are mostly far shorter than a row, and a batch is as long as its
        longest row, so without packing a third of every step was padding. What follows a
        separator is another file, as in a prompt's cross-file chunks."""
        cfg, s = self.config, self.fmt.specials
        for _ in range(cfg.fim_per_row - 1):
            free = cfg.seq_len - len(row.ids) - 1
            example = self.fim.sample(rng, size * cfg.max_middle_blocks)
            hole = fim_row(example, size, s.end_of_middle, s.pad, cfg, cfg.prompt_blocks)
            if len(hole.ids) > free:
                break
            row = self._joined(row, hole)
        free = cfg.seq_len - len(row.ids) - 1
        if self.code is None or free < size:
            return row
        return self._joined(row, stream_row(self.code, rng, free, size))

    def _joined(self, row: Row, more: Row) -> Row:
        """`row`, a file separator (a one-token block), then `more` with its blocks moved along."""
        start = len(row.ids) + 1
        stale = None if row.stale is None and more.stale is None else (
            (row.stale or [-1] * len(row.ids)) + [-1] + (more.stale or [-1] * len(more.ids)))
        return Row(row.ids + [self.fmt.specials.file_separator] + more.ids,
                   row.block_start + [len(row.ids)] + [start + b for b in more.block_start],
                   row.weights + [1.0] + more.weights, stale)

    def batch(self, seed: int, step: int, batch_size: int, share: slice = slice(None)) -> BlockBatch:
        """The rows of one step (`share`: a data-parallel rank's rows of it): a pure function of
        (seed, step). Each row has its own generator, so a rank builds only its own rows."""
        key = seed * 1_000_003 + step
        size = random.Random(key).choices(self.config.block_sizes, weights=self.config.block_weights)[0]
        rows = [self.row(random.Random(key * 4_096 + i), size) for i in range(batch_size)[share]]
        return collate_rows(rows, self.fmt.specials.pad)


def canvas_batch(examples: list[Example], pad_id: int, end_id: int, pad_weight: float = 0.1) -> BlockBatch:
    """One-canvas FIM examples as block rows (prompt never noised, the canvas one block).

    This is the old objective's layout, used for validation so that held-out losses stay
    comparable across trainers, and by the test that the two objectives agree."""
    cfg = MixConfig(pad_weight=pad_weight)
    rows = [fim_row(e, len(e.canvas_ids), end_id, pad_id, cfg, prompt_blocks=False) for e in examples]
    return collate_rows(rows, pad_id)
