"""The one denoising loop, with swappable acceptance strategies.

transformers' `generate()` runs DiffusionGemma end to end, but an editor needs more from each
step: a cancel check before every forward pass, a draft after every step, the confidence of every
final token, canvas positions that are clamped to known text, canvases seeded with existing text,
and several candidates in one batch. This loop adds those around transformers' own sampler pieces
(`EntropyBoundSampler`, `StableAndConfidentStoppingCriteria`,
`LinearTemperatureScheduleLogitsProcessor`) and the model's decoder forward, without copying them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    EntropyBoundSampler,
    EntropyBoundSamplerConfig,
    LinearTemperatureScheduleLogitsProcessor,
    StableAndConfidentStoppingCriteria,
)

from .config import SamplingOptions
from .errors import Cancelled


class CancelToken(Protocol):
    """Anything with an `is_cancelled()` method; checked before every denoising step."""

    def is_cancelled(self) -> bool: ...


class NeverCancelled:
    def is_cancelled(self) -> bool:
        return False


# Called after every step with (step index, current best guess of the canvas [N, C]).
StepCallback = Callable[[int, torch.Tensor], None]


@dataclass
class CanvasPlan:
    """How the canvas starts: random, seeded with text, and which positions are clamped.

    `seed` holds the starting tokens (any values where `seeded` is False); `clamped` marks the
    positions that must come back unchanged (known text between holes, a fixed head, or the
    padding that gives a row a shorter canvas). Each may be [C] (all rows alike) or [N, C].
    """

    length: int
    seed: torch.Tensor | None = None  # [C] or [N, C] long
    seeded: torch.Tensor | None = None  # [C] or [N, C] bool: positions that start from `seed`
    clamped: torch.Tensor | None = None  # [C] or [N, C] bool: positions that never change

    def rows(self, n: int, device) -> "CanvasPlan":
        """The same plan with every tensor as [N, C] on `device`."""

        def expand(t, dtype):
            if t is None:
                return None
            t = t.to(device=device, dtype=dtype)
            return t.expand(n, self.length) if t.dim() == 1 else t

        return CanvasPlan(self.length, expand(self.seed, torch.long), expand(self.seeded, torch.bool),
                          expand(self.clamped, torch.bool))


@dataclass
class DenoiseOutput:
    tokens: torch.Tensor  # [N, C] final argmax canvas
    confidence: torch.Tensor  # [N, C] probability of each final token
    steps: torch.Tensor  # [N] decoder forward passes per candidate


class Strategy(Protocol):
    """Decides which sampled tokens to accept and what the rejected positions become."""

    def step(
        self, canvas: torch.Tensor, sampled: torch.Tensor, logits: torch.Tensor, cur_step: int
    ) -> torch.Tensor: ...

    def final(self, canvas: torch.Tensor, argmax: torch.Tensor) -> torch.Tensor: ...


class EntropyBoundStrategy:
    """DiffusionGemma's own rule: accept the lowest-entropy tokens, re-noise the rest uniformly."""

    def __init__(self, entropy_bound: float, canvas_length: int, vocab_size: int, max_steps: int):
        config = EntropyBoundSamplerConfig(entropy_bound=float(entropy_bound))
        self.sampler = EntropyBoundSampler(config, canvas_length, vocab_size, max_steps)

    def step(self, canvas, sampled, logits, cur_step):
        accepted = self.sampler.accept_canvas(canvas, sampled, logits, cur_step)
        return self.sampler.renoise_canvas(accepted, cur_step)

    def final(self, canvas, argmax):
        # Rejected positions of the last canvas are noise; the model's best guess is the answer.
        return argmax


class RefineStrategy(EntropyBoundStrategy):
    """For seeded canvases: accept like the entropy bound, but keep rejected tokens as they are.

    Re-noising a rejected position would throw away the user's text there; keeping it lets the
    model change only the tokens it is confident should change.
    """

    def step(self, canvas, sampled, logits, cur_step):
        return self.sampler.accept_canvas(canvas, sampled, logits, cur_step)

    def final(self, canvas, argmax):
        # Every position of the canvas is either the user's text or an accepted change.
        return canvas


def initial_canvas(plan: CanvasPlan, n: int, vocab_size: int, device) -> torch.Tensor:
    """Uniform random tokens, overwritten by the seed where the plan seeds or clamps."""
    canvas = torch.randint(0, vocab_size, (n, plan.length), device=device)  # [N, C]
    rows = plan.rows(n, device)
    if rows.seed is not None:
        keep = torch.zeros_like(canvas, dtype=torch.bool)
        for mask in (rows.seeded, rows.clamped):
            if mask is not None:
                keep |= mask
        canvas = torch.where(keep, rows.seed, canvas)
    return canvas


def clamp_logits(logits: torch.Tensor, rows: CanvasPlan) -> torch.Tensor:
    """Make clamped positions certain of their token, so they cost no entropy and never move."""
    if rows.clamped is None or not bool(rows.clamped.any()):
        return logits
    forced = torch.full_like(logits, torch.finfo(logits.dtype).min)  # [N, C, V]
    forced.scatter_(-1, rows.seed[..., None], 0.0)
    return torch.where(rows.clamped[..., None], forced, logits)


# exp(-80) is still a normal float32; anything lower underflows towards denormals, which x86 CPUs
# compute an order of magnitude slower. Below this many nats under the best token a logit carries
# no probability mass that float32 can show anyway.
LOGIT_FLOOR = 80.0


def floor_logits(logits: torch.Tensor) -> torch.Tensor:
    """Raise every logit to at least (row maximum - LOGIT_FLOOR); [N, C, V] -> [N, C, V].

    Late steps divide the logits by a temperature near zero, which pushes most of the vocabulary
    thousands of nats below the best token. Every exp over them (the softmax here, the entropies in
    transformers' sampler and stopping rule) then ran about 10x slower than over ordinary values,
    several milliseconds per step on a CPU. The probabilities and entropies are unchanged in float32.
    """
    return torch.maximum(logits, logits.amax(dim=-1, keepdim=True) - LOGIT_FLOOR)


def sample_tokens(probs: torch.Tensor) -> torch.Tensor:
    """One token per position drawn from `probs` [N, C, V] by inverse CDF; returns [N, C].

    Same distribution as `torch.multinomial`, but it draws one uniform number per position instead
    of one per vocabulary entry: on a CPU that made sampling 13-22x faster, and multinomial had been
    over a quarter of every denoising step.
    """
    cdf = probs.cumsum(dim=-1)  # [N, C, V]
    # Scaling by the last entry absorbs the rounding of the float32 cumulative sum.
    u = torch.rand(cdf.shape[:-1] + (1,), device=probs.device, dtype=cdf.dtype) * cdf[..., -1:]  # [N, C, 1]
    # right=True skips tokens of zero probability even when u lands exactly on a boundary.
    index = torch.searchsorted(cdf, u, right=True).squeeze(-1)  # [N, C]
    return index.clamp_max(probs.shape[-1] - 1)


def denoise(
    decoder_forward: Callable[..., torch.Tensor],
    n: int,
    plan: CanvasPlan,
    options: SamplingOptions,
    vocab_size: int,
    device,
    strategy: Strategy,
    cancel: CancelToken | None = None,
    on_step: StepCallback | None = None,
    initial: torch.Tensor | None = None,
) -> DenoiseOutput:
    """Refine `n` canvases in one batch until they are stable and confident, or out of steps.

    `decoder_forward(canvas [N, C], self_conditioning_logits [N, C, V] | None) -> logits` runs the
    model's decoder against the already-filled encoder cache.
    """
    cancel = cancel or NeverCancelled()
    temperature = LinearTemperatureScheduleLogitsProcessor(options.t_min, options.t_max, options.max_steps)
    stopping = StableAndConfidentStoppingCriteria(options.stability_threshold, options.confidence_threshold)
    canvas = initial if initial is not None else initial_canvas(plan, n, vocab_size, device)  # [N, C]
    rows = plan.rows(n, device)
    argmax = canvas
    finished = torch.zeros(n, dtype=torch.bool, device=device)  # [N]
    steps = torch.zeros(n, dtype=torch.long, device=device)  # [N]
    self_conditioning = None  # [N, C, V]
    last_logits = None
    raw_logits = None  # [N, C, V] before the temperature schedule, for the reported confidence

    for index, cur_step in enumerate(reversed(range(1, options.max_steps + 1))):
        if cancel.is_cancelled():
            raise Cancelled("cancelled between denoising steps")
        steps += (~finished).long()
        raw = clamp_logits(decoder_forward(canvas, self_conditioning), rows)  # [N, C, V]
        logits = floor_logits(clamp_logits(temperature(None, raw, cur_step=cur_step), rows))
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
        sampled = sample_tokens(probs)  # [N, C]
        new_argmax = logits.argmax(dim=-1)  # [N, C]
        new_canvas = strategy.step(canvas, sampled, logits, cur_step)
        if rows.clamped is not None:
            new_canvas = torch.where(rows.clamped, rows.seed, new_canvas)
        if last_logits is not None and bool(finished.any()):
            # Finished rows keep their result while the others go on, as if they ran alone.
            new_argmax = torch.where(finished[:, None], argmax, new_argmax)
            new_canvas = torch.where(finished[:, None], canvas, new_canvas)
            logits = torch.where(finished[:, None, None], last_logits, logits)
            raw = torch.where(finished[:, None, None], raw_logits, raw)
        finished |= stopping(new_argmax, logits)
        canvas, argmax, last_logits, raw_logits = new_canvas, new_argmax, logits, raw
        self_conditioning = logits
        if on_step is not None:
            on_step(index, argmax)
        if bool(finished.all()):
            break

    if last_logits is None:
        return DenoiseOutput(canvas, torch.ones(canvas.shape, device=device), steps)
    tokens = strategy.final(canvas, argmax)  # [N, C]
    # Confidence is the model's own probability, before the sampling temperature sharpened it: a
    # temperature near zero at the last step would make every token look certain.
    confidence = torch.softmax(raw_logits.float(), dim=-1).gather(-1, tokens[..., None]).squeeze(-1)  # [N, C]
    return DenoiseOutput(tokens, confidence, steps)
