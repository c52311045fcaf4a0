"""What a fill is asked and what it answers: the engine's request and result types.

Kept apart from `engine.py` so that the request flow there reads on its own; every caller (the
server, the remote backend, benchmarks) speaks these two types, whichever engine serves them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .candidates import Candidate


@dataclass(frozen=True)
class FillRequest:
    """One hole to fill (or, with `seed_text`, one span to rewrite in place)."""

    prefix: str
    suffix: str = ""
    n: int = 1
    chunks: tuple[str, ...] = ()
    canvas_length: int = 0
    max_steps: int = 0
    entropy_bound: float = 0.0
    max_canvases: int = 1
    seed: int = 0
    seed_text: str | None = None
    # A rewrite re-noises the seed tokens the model finds unlikely (below `renoise_below`, by
    # default the model's own tuned value), the least likely first and at most `renoise_fraction`
    # of them; a seed the model believes stays.
    renoise_fraction: float = 0.25
    renoise_below: float | None = None
    instruction: str | None = None
    reuse_cache: bool = True
    # Try several canvas lengths in one batch (n rows each) and rank them together.
    lengths: tuple[int, ...] = ()
    # A joint fill of several holes: text between holes as str, each hole as an int (its free
    # positions); the prefix comes before the first part and the suffix after the last.
    segments: tuple[str | int, ...] = ()
    # Next-token-head tokens before a plain fill's canvas (`lead.py`); -1: the model's own setting.
    lead_tokens: int = -1
    lead_line: bool | None = None  # the head writes the first line; None: the model's own setting
    lead_stop: float | None = None  # the line lead's stop probability (`lead.py`); None: the model's
    lead_beam: int | None = None  # first lines a line lead weighs (`beam.py`); None: the model's
    heal: bool | None = None  # the head may finish the prefix's last token (`healing.py`); None: on


@dataclass
class FillResult:
    candidates: list[Candidate]
    prompt_tokens: int
    reused_tokens: int
    encoded_tokens: int
    prefill_ms: float
    denoise_ms: float
    canvases: int = 1
    timings: dict = field(default_factory=dict)
