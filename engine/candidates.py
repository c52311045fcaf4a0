"""Candidates: what a fill returns, built from the final canvases.

Split from `engine.py` so that the request flow there reads in one screen. Everything here is a
pure function of the canvases, the tokenizer and the prompt format's stop tokens; the same
functions serve fresh fills, re-noised repairs and fills led by the next-token head.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from .prompt import decode_with_offsets


@dataclass
class Candidate:
    text: str
    token_ids: list[int]
    token_offsets: list[tuple[int, int]]  # character span of each token in `text`
    confidences: list[float]
    steps: int
    tokens_per_forward: float
    finished: bool  # True when the model ended the middle itself
    canvas: list[int] = field(default_factory=list)  # the whole final canvas, stop and padding included
    length: int = 0  # the canvas length this candidate had (variable-length fills)
    holes: list[str] = field(default_factory=list)  # per-hole texts of a joint multi-hole fill
    # How many of the first tokens (of `token_ids` and `canvas` alike) the next-token head wrote
    # before the decoder's canvas; a repair re-noises only the positions after them.
    lead: int = 0

    @property
    def mean_confidence(self) -> float:
        return sum(self.confidences) / len(self.confidences) if self.confidences else 1.0


def plain_text(tokenizer, stop_ids, ids: list[int]) -> str:
    """The text of `ids` without stop tokens or special tokens."""
    ids = [t for t in ids if t not in stop_ids]
    return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)


def first_stop(canvas: list[int], stop_ids, limit: int | None = None) -> int:
    """Index of the first stop token in `canvas[:limit]`, or the end of that stretch."""
    limit = len(canvas) if limit is None else limit
    return next((i for i, t in enumerate(canvas[:limit]) if t in stop_ids), limit)


def build(tokenizer, stop_ids, stop: int, tokens: torch.Tensor, confidence: torch.Tensor, steps: torch.Tensor,
          row_lengths: list[int], holes, pinned_rows: list[int] | None = None) -> list[Candidate]:
    """One candidate per canvas row, finished and confident ones first (the editor shows the first).

    `tokens` and `confidence` are [N, C]; `steps` is [N]. `holes` are the (start, end) canvas
    spans of a joint multi-hole fill; `pinned_rows` the free lengths of a pinned-suffix plan.
    """
    out = []
    for row in range(tokens.shape[0]):
        canvas = tokens[row].tolist()
        parts: list[str] = []
        if pinned_rows is not None:
            # The middle is the free stretch; the pinned suffix after it is the file's own text.
            end = first_stop(canvas, stop_ids, pinned_rows[row])
        elif holes:
            # A joint fill: the middle is the whole canvas; each hole is its free stretch.
            parts = [plain_text(tokenizer, stop_ids, canvas[a:b]) for a, b in holes]
            end = first_stop(canvas, {stop})
        else:
            end = first_stop(canvas, stop_ids)
        kept = [i for i, t in enumerate(canvas[:end]) if t not in stop_ids]
        ids = [canvas[i] for i in kept]
        text, offsets = decode_with_offsets(tokenizer, ids)
        taken = int(steps[row])
        out.append(Candidate(
            text=text,
            token_ids=ids,
            token_offsets=offsets,
            confidences=[float(confidence[row, i]) for i in kept],
            steps=taken,
            tokens_per_forward=(end + (end < len(canvas))) / max(1, taken),
            finished=end < row_lengths[row] or pinned_rows is not None,
            canvas=canvas,
            length=row_lengths[row] if row < len(row_lengths) else len(canvas),
            holes=parts,
        ))
    out.sort(key=lambda c: (not c.finished, -c.mean_confidence))
    return out


def led(tokenizer, candidate: Candidate, ids: list[int], confidences: list[float], passes: int) -> Candidate:
    """`candidate` (the decoder's part) with the head's `ids` in front; `passes` is what they cost."""
    if not ids:
        return candidate
    token_ids = ids + candidate.token_ids
    text, offsets = decode_with_offsets(tokenizer, token_ids)
    steps = candidate.steps + passes
    # The decoder's committed tokens (stop included) plus the head's, over all forward passes.
    committed = candidate.tokens_per_forward * max(1, candidate.steps) + len(ids)
    return replace(candidate, text=text, token_ids=token_ids, token_offsets=offsets,
                   confidences=list(confidences) + candidate.confidences, steps=steps,
                   tokens_per_forward=committed / max(1, steps), canvas=ids + candidate.canvas,
                   lead=len(ids) + candidate.lead)


def head_only(tokenizer, stop: int, ids: list[int], confidences: list[float], passes: int) -> Candidate:
    """A middle the head ended within its lead: no canvas was needed."""
    text, offsets = decode_with_offsets(tokenizer, ids)
    return Candidate(text=text, token_ids=list(ids), token_offsets=offsets, confidences=list(confidences),
                     steps=passes, tokens_per_forward=(len(ids) + 1) / max(1, passes), finished=True,
                     canvas=list(ids) + [stop], length=len(ids) + 1, lead=len(ids))
