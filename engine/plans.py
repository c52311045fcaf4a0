"""Canvas plans: how each kind of request lays out and clamps its canvas.

The denoising loop is one; what differs between a fresh fill, a rewrite, a fill tried at several
lengths, a joint fill of several holes and a syntax-guided repair is only where the canvas starts
and which positions are clamped. Each function here builds that as a `CanvasPlan`, from plain token
ids, so the loop never needs to know which feature called it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .denoise import CanvasPlan


def fresh(length: int) -> CanvasPlan:
    """Uniform noise everywhere: the ordinary fill."""
    return CanvasPlan(length)


def variable_lengths(lengths: list[int], n: int, pad: int) -> tuple[CanvasPlan, list[int]]:
    """`n` rows per length in one batch: a row of length l has its positions from l on clamped to
    padding, so the model must end the middle before l. Returns the plan and each row's length."""
    width = max(lengths)
    row_lengths = [l for l in lengths for _ in range(n)]
    seed = torch.full((len(row_lengths), width), pad, dtype=torch.long)  # [N, C]
    clamped = torch.arange(width)[None, :] >= torch.tensor(row_lengths)[:, None]  # [N, C]
    return CanvasPlan(width, seed=seed, clamped=clamped), row_lengths


def pinned(lengths: list[int], head: list[int], n: int, stop: int, pad: int) -> tuple[CanvasPlan, list[int]]:
    """`n` rows per length: that many free positions, then the suffix's first tokens, end of
    middle and padding, all clamped. Returns the plan and each row's number of free positions."""
    width = max(lengths) + len(head) + 1
    free = [k for k in lengths for _ in range(n)]
    seed = torch.full((len(free), width), pad, dtype=torch.long)  # [N, C]
    for row, k in enumerate(free):
        seed[row, k : k + len(head)] = torch.tensor(head, dtype=torch.long)
        seed[row, k + len(head)] = stop
    clamped = torch.arange(width)[None, :] >= torch.tensor(free)[:, None]  # [N, C]
    return CanvasPlan(width, seed=seed, clamped=clamped), free


def seeded(seed_ids: list[int], stop: int, pad: int, min_length: int) -> CanvasPlan:
    """A canvas that starts from existing text (a rewrite), with room to grow by a quarter."""
    length = max(min_length, len(seed_ids) + max(4, len(seed_ids) // 4))
    tail = [stop] + [pad] * (length - len(seed_ids) - 1)
    seed = torch.tensor(seed_ids + tail, dtype=torch.long)
    return CanvasPlan(length, seed=seed, seeded=torch.ones(length, dtype=torch.bool))


def renoised(canvas_ids: list[int], positions: list[int]) -> CanvasPlan:
    """Everything clamped to the given canvas except `positions`, which start from noise again."""
    seed = torch.tensor(canvas_ids, dtype=torch.long)
    clamped = torch.ones(len(canvas_ids), dtype=torch.bool)
    clamped[[p for p in positions if 0 <= p < len(canvas_ids)]] = False
    return CanvasPlan(len(canvas_ids), seed=seed, clamped=clamped)


@dataclass(frozen=True)
class Segments:
    """A joint canvas: known text clamped between free stretches, one stretch per hole."""

    plan: CanvasPlan
    holes: list[tuple[int, int]]  # canvas positions [start, end) of each hole's free stretch


def segments(parts: list[list[int] | int], stop: int, pad: int, length: int | None = None) -> Segments:
    """Lay out `parts` (token ids of known text, or an int: a hole of that many free positions),
    then the end-of-middle token and padding, clamped."""
    ids: list[int] = []
    clamped: list[bool] = []
    holes = []
    for part in parts:
        if isinstance(part, int):
            holes.append((len(ids), len(ids) + part))
            ids += [pad] * part
            clamped += [False] * part
        else:
            ids += list(part)
            clamped += [True] * len(part)
    ids.append(stop)
    clamped.append(True)
    width = max(length or 0, len(ids))
    ids += [pad] * (width - len(ids))
    clamped += [True] * (width - len(clamped))
    plan = CanvasPlan(width, seed=torch.tensor(ids), clamped=torch.tensor(clamped))
    return Segments(plan, holes)
