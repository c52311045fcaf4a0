"""The engine: a loaded model plus the request API that the language server and CLI call.

`Engine.fill` turns plain data (prefix, suffix, options) into candidates with text, per-token
confidence, steps, tokens per forward and timings. It owns the encoder cache that is reused
across requests, and runs several canvases in a row for middles longer than one canvas. The
engine is not thread-safe on purpose: the server runs it on a single compute worker.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch

from .config import (EngineConfig, SamplingOptions, sampling_defaults, tuned_lead_beam, tuned_lead_line, tuned_lead_margin,
                     tuned_lead_stop, tuned_lead_tokens, tuned_renoise_below)
from . import candidates as cands, healing, plans
from .candidates import Candidate
from .denoise import CancelToken, EntropyBoundStrategy, RefineStrategy, StepCallback, denoise
from .adapt.adapter import AdapterError
from .beam import beam_lead
from .errors import Cancelled, OutOfMemoryError
from .kvcache import PrefixCache, common_prefix_length, fork
from .lead import Lead, Lines, extend, lead, led_steps, stop_threshold
from .loader import check_directory, load_model, placement, resolve_source
from .prompt import FimFormat, PinnedFormat, choose_format, encode
from .proofread import Edit, proofread
from .lexicon import load as load_lexicon
from .precision import choose as choose_precision
from .quantize import checkpoint_format, describe, model_bytes, model_parameters
from .requests import FillRequest, FillResult  # re-exported: callers import them from here


# What `_plan` returns as the holes of a pinned-suffix plan: each row's middle is its own free stretch.
PINNED = ("pinned-suffix rows",)


class Engine:
    def __init__(self, model, tokenizer, config: EngineConfig, source: str, quantization: str = "none"):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.source = source
        self.quantization = quantization
        self.precision = ""  # how an automatic precision was chosen (`precision.Choice.describe`)
        gen = model.generation_config
        extra = gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
        self.format = choose_format(tokenizer, [i for i in extra if i is not None], config.prompt_format)
        self.prefix_cache = PrefixCache(model, chunk_size=256 if self.device.type == "cpu" else 2048)
        self.vocab_size = model.config.get_text_config().vocab_size
        self.defaults = sampling_defaults(model, config)
        self.memory_bytes = model_bytes(model)
        # The adapter in use ({path, kind, workspace, created, ...}), or why one was refused.
        self.adapter: dict = {}
        self.parameters = model_parameters(model)
        # Counts decoder passes over the engine's life; status reports it, tests watch it stop.
        self.forward_passes = 0
        self.healer = healing.Healer(tokenizer, self.format.stop_ids | frozenset(tokenizer.all_special_ids))

    @property
    def device(self) -> torch.device:
        return self.model.device

    def info(self) -> dict:
        return {
            "model": self.source,
            "format": self.format.name,
            "device": str(self.device),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "quantization": self.quantization,
            "parameters": self.parameters,
            "memoryBytes": self.memory_bytes,
            "canvasLength": self.defaults.canvas_length,
            "maxSteps": self.defaults.max_steps,
            "leadTokens": self.defaults.lead_tokens,
            "forwardPasses": self.forward_passes,
            "adapter": self.adapter or None,
            "precision": self.precision or None,
        }

    def options(self, request: FillRequest) -> SamplingOptions:
        d = self.defaults
        return replace(d, canvas_length=request.canvas_length or d.canvas_length,
                       max_steps=request.max_steps or d.max_steps, entropy_bound=request.entropy_bound or d.entropy_bound,
                       renoise_below=d.renoise_below if request.renoise_below is None else request.renoise_below,
                       lead_tokens=d.lead_tokens if request.lead_tokens < 0 else request.lead_tokens,
                       lead_line=d.lead_line if request.lead_line is None else request.lead_line,
                       lead_stop=d.lead_stop if request.lead_stop is None else request.lead_stop,
                       lead_beam=d.lead_beam if request.lead_beam is None else max(1, request.lead_beam),
                       heal=d.heal if request.heal is None else request.heal)

    def fill(self, request: FillRequest, cancel: CancelToken | None = None, on_step: StepCallback | None = None) -> FillResult:
        try:
            return self._fill(request, cancel, on_step)
        except torch.OutOfMemoryError as exc:
            self._recover_memory()
            raise OutOfMemoryError(f"out of memory on {self.device} during a request: {exc}") from exc

    @property
    def proofreads(self) -> bool:
        """Whether prose can be proofread (`proofread.py`): a FIM-format model, which this
        project's training gives a next-token head; a chat checkpoint's head was never measured
        as a judge of prose, so its paragraphs keep the instructed rewrite."""
        return isinstance(self.format, FimFormat)

    def proofread(self, paragraph: str, before: str = "", known: frozenset[str] = frozenset(),
                  cancel: CancelToken | None = None) -> tuple[str, list[Edit]]:
        """`paragraph` with the word edits the model judges right, and those edits."""
        if cancel is not None and cancel.is_cancelled():
            raise Cancelled("cancelled before proofreading")
        bos = [] if self.format.specials.bos is None else [self.format.specials.bos]
        try:
            return proofread(self.model, lambda text: encode(self.tokenizer, text), bos, paragraph, before,
                             load_lexicon(), known=known)
        except torch.OutOfMemoryError as exc:
            self._recover_memory()
            raise OutOfMemoryError(f"out of memory on {self.device} while proofreading: {exc}") from exc

    def _recover_memory(self) -> None:
        self.prefix_cache.clear()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    @torch.inference_mode()
    def _fill(self, request: FillRequest, cancel, on_step) -> FillResult:
        options = self.options(request)
        if request.seed_text is not None:
            prompt = self.format.rewrite_ids(request.prefix, request.seed_text, request.suffix, request.instruction,
                                             request.chunks)
        else:
            prompt = self.format.infill_ids(request.prefix, request.suffix, request.chunks)
        started = time.perf_counter()
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(request.seed)
            prefill = self.prefix_cache.prefill(prompt, reuse=request.reuse_cache)
            prefill_ms = (time.perf_counter() - started) * 1000
            plan, strategy, rows, row_lengths, holes = self._plan(request, options)
            pinned_rows = row_lengths if holes is PINNED else None
            options = replace(options, canvas_length=plan.length)
            continuable = not (request.seed_text is not None or request.lengths or request.segments or pinned_rows)
            base, start, led = prefill.cache, prefill.prompt_tokens, Lead()
            led = self._lead(request, prompt, prefill, options, pinned_rows)
            if led.ids and not led.stopped:
                base, start = self._led_context(request, prompt, led.ids)
                led.passes += 1  # the pass that encoded the context's new tokens
            cache = fork(base, rows)
            tokens, confidence, steps = [], [], torch.zeros(rows, dtype=torch.long)
            canvases = 0
            # When the head ended the middle itself, no canvas is needed.
            for canvases in range(1, (0 if led.stopped else max(1, request.max_canvases)) + 1):
                out = denoise(
                    lambda canvas, sc: self._decode(canvas, sc, cache),
                    rows, plan, options, self.vocab_size, self.device, strategy, cancel, led_steps(on_step, led),
                )
                tokens.append(out.tokens.cpu())
                confidence.append(out.confidence.float().cpu())
                steps += out.steps.cpu()
                if not continuable or canvases == request.max_canvases or self._all_stopped(out.tokens):
                    break
                # The next canvas continues the middle: its tokens join the encoder's context.
                self._encode_canvas(out.tokens, cache, start + (canvases - 1) * plan.length)
                plan, strategy = self._fresh_plan(options)
        denoise_ms = (time.perf_counter() - started) * 1000 - prefill_ms
        if led.stopped:
            candidates = [cands.head_only(self.tokenizer, self._stop, line.ids, line.confidences, led.passes)
                          for line in [led, *led.alternatives][: max(1, request.n)]]
        else:
            tokens = torch.cat(tokens, -1)  # [N, C * canvases]
            if not request.lengths and pinned_rows is None:
                row_lengths = [tokens.shape[1]] * rows
            candidates = self._candidates(tokens, torch.cat(confidence, -1), steps, row_lengths, holes, pinned_rows)
            candidates = [cands.led(self.tokenizer, c, led.ids, led.confidences, led.passes) for c in candidates]
        return FillResult(
            candidates=candidates,
            prompt_tokens=prefill.prompt_tokens,
            reused_tokens=prefill.reused_tokens,
            encoded_tokens=prefill.encoded_tokens,
            prefill_ms=prefill_ms,
            denoise_ms=denoise_ms,
            canvases=canvases,
            timings={"leadTokens": len(led.ids)} if led.passes or led.stopped else {},
        )

    def _lead(self, request: FillRequest, prompt: list[int], prefill, options: SamplingOptions, pinned_rows) -> Lead:
        """The head's first tokens: the first line (or `lead_tokens` tokens) of a hole that ends its
        line; in a hole that closes inside its line, only the token that heals the prefix
        (`healing.py`), and nothing where it cannot be healed (`lead.py` has the measurements)."""
        if not (options.lead_tokens and self._leads(request, pinned_rows)):
            return Lead()
        heal = self.healer.point(prompt, self.format.specials.fim_middle) if options.heal else None
        ends_line = not request.suffix.partition("\n")[0].strip()
        if not ends_line and heal is None:
            return Lead()
        lines = Lines(self.tokenizer) if ends_line and options.lead_line else None
        hidden, cache, start = self.prefix_cache.last_hidden, fork(prefill.cache, 1), prefill.prompt_tokens
        if heal is not None:
            hidden, start = healing.rewind(self.model, cache, prompt, start)
        # Several candidates of a middle the head ends would be one line n times: the beam finds
        # the others, and without a beam of the model's own (`lead_beam` 1) the greedy line stays first.
        # A request that pins `lead_beam` to 1 (ghost text, for its latency: a beam of four took
        # typing's p50 from 51 to 253 ms) gets no beam at all.
        alternatives = request.n if request.n > 1 and request.lead_beam != 1 else 0
        width = max(options.lead_beam, alternatives)
        margin = options.lead_margin if options.lead_beam > 1 else math.inf
        beam = partial(beam_lead, width=width, margin=margin)
        decode = lead if lines is None or width <= 1 else beam
        led = decode(self.model, hidden, cache, start, options.lead_tokens if ends_line else 1, self.format.stop_ids,
                     lines, None if heal is None else heal.allowed, stop_threshold(request, options.lead_stop))
        return led if heal is None else healing.trim(self.tokenizer, led, heal)

    def _leads(self, request: FillRequest, pinned_rows) -> bool:
        """Whether the head may write a fill's first tokens: plain infill with a FIM prompt only
        (a rewrite's seed, a joint fill's segments and a pinned suffix fix the canvas's layout), on
        a cache that can be cut back to the prefix (`_led_context`)."""
        return (request.seed_text is None and not request.segments and pinned_rows is None
                and isinstance(self.format, FimFormat) and self.prefix_cache.last_hidden is not None
                and self.prefix_cache.croppable())

    def _led_context(self, request: FillRequest, prompt: list[int], ids: list[int]):
        """A one-row cache of the prompt whose prefix ends with the head's text, and its length.

        The canvas then starts right after `<fim_middle>`, where training put every middle's first
        block; a canvas after the head's tokens in the middle (the way a second canvas continues a
        first) scored 0.185 edit similarity on the 400 held-out holes against 0.198 this way.
        Only the tokens from the end of the prefix on are encoded; the rest is the prompt's cache.
        """
        text = cands.plain_text(self.tokenizer, self.format.stop_ids, ids)
        context = self.format.infill_ids(request.prefix + text, request.suffix, request.chunks)
        common = min(common_prefix_length(prompt, context), len(context) - 1)
        cache = fork(self.prefix_cache.cache, 1)
        cache.crop(common - len(prompt))  # back to where the two prompts part
        extend(self.model, cache, context[common:], common)
        return cache, len(context)

    @property
    def _stop(self) -> int:
        s = self.format.specials
        fim = self.format.base if isinstance(self.format, PinnedFormat) else self.format
        return s.end_of_middle if isinstance(fim, FimFormat) and s.end_of_middle is not None else s.eos

    def _fresh_plan(self, options: SamplingOptions):
        strategy = EntropyBoundStrategy(options.entropy_bound, options.canvas_length, self.vocab_size, options.max_steps)
        return plans.fresh(options.canvas_length), strategy

    def _plan(self, request: FillRequest, options: SamplingOptions):
        """(plan, strategy, rows, per-row lengths, hole spans) for the kind of request."""
        n, pad = max(1, request.n), self.format.specials.pad
        if request.seed_text is not None:
            plan = plans.seeded(encode(self.tokenizer, request.seed_text), self._stop, pad, options.canvas_length)
            plan.seeded = self._confident_positions(plan.seed, request.renoise_fraction, options.renoise_below)
            strategy = RefineStrategy(options.entropy_bound, plan.length, self.vocab_size, options.max_steps)
            return plan, strategy, n, [plan.length] * n, []
        if request.segments:
            parts = [p if isinstance(p, int) else encode(self.tokenizer, p) for p in request.segments]
            layout = plans.segments(parts, self._stop, pad)
            strategy = EntropyBoundStrategy(options.entropy_bound, layout.plan.length, self.vocab_size, options.max_steps)
            return layout.plan, strategy, n, [layout.plan.length] * n, layout.holes
        if isinstance(self.format, PinnedFormat):
            # Free positions of a few lengths, the suffix's head pinned after each (see PinnedFormat).
            base = options.canvas_length
            lengths = sorted(set(request.lengths or (max(4, base // 2), base)))
            plan, free = plans.pinned(lengths, self.format.suffix_head(request.suffix), n, self._stop, pad)
            strategy = EntropyBoundStrategy(options.entropy_bound, plan.length, self.vocab_size, options.max_steps)
            return plan, strategy, len(free), free, PINNED
        if request.lengths:
            plan, row_lengths = plans.variable_lengths(sorted(set(request.lengths)), n, pad)
            strategy = EntropyBoundStrategy(options.entropy_bound, plan.length, self.vocab_size, options.max_steps)
            return plan, strategy, len(row_lengths), row_lengths, []
        plan, strategy = self._fresh_plan(options)
        return plan, strategy, n, [plan.length] * n, []

    @torch.inference_mode()
    def renoise(self, request: FillRequest, candidate: Candidate, positions: list[int],
                cancel: CancelToken | None = None) -> Candidate:
        """Denoise `positions` of a candidate's canvas again with everything else clamped.

        Used for syntax-guided repair: the caller finds the tokens that overlap a syntax error and
        asks for just those again. The prompt is the request's own, so the encoder cache is reused.
        """
        lead = candidate.lead
        positions = [p - lead for p in positions if p >= lead]  # the head's tokens stay
        if not positions:
            return candidate
        options = self.options(request)
        prompt = self.format.infill_ids(request.prefix, request.suffix, request.chunks)
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(request.seed + 1)
            prefill = self.prefix_cache.prefill(prompt, reuse=request.reuse_cache)
            plan = plans.renoised(candidate.canvas[lead:], positions)
            strategy = EntropyBoundStrategy(options.entropy_bound, plan.length, self.vocab_size, options.max_steps)
            cache = self._led_context(request, prompt, candidate.canvas[:lead])[0] if lead else fork(prefill.cache, 1)
            out = denoise(lambda c, sc: self._decode(c, sc, cache), 1, plan, replace(options, canvas_length=plan.length),
                          self.vocab_size, self.device, strategy, cancel)
        repaired = self._candidates(out.tokens.cpu(), out.confidence.float().cpu(), out.steps.cpu() + candidate.steps,
                                    [plan.length], [])[0]
        return cands.led(self.tokenizer, repaired, candidate.canvas[:lead], candidate.confidences[:lead], 0)

    def _confident_positions(self, seed: torch.Tensor, renoise_fraction: float, renoise_below: float) -> torch.Tensor:
        """Keep the seed where the model believes it; re-noise the unlikely tokens, least likely first.

        A fixed share re-noised regardless of likelihood turned correct lines into noise: the
        embedded model kept 0 of 6 correct one-line selections that way, and 5 of 6 when only the
        tokens it doubts are re-noised (a typo's tokens score well under the threshold).
        """
        cache = fork(self.prefix_cache.cache, 1)
        logits = self._decode(seed[None].to(self.device), None, cache)[0]  # [C, V]
        likelihood = torch.softmax(logits.float(), -1).gather(-1, seed.to(self.device)[:, None]).squeeze(-1).cpu()  # [C]
        count = int(len(seed) * renoise_fraction)
        keep = torch.ones(len(seed), dtype=torch.bool)
        if count:
            doubted = likelihood.argsort()[:count]
            keep[doubted[likelihood[doubted] < renoise_below]] = False
        return keep

    def _decode(self, canvas: torch.Tensor, self_conditioning, cache) -> torch.Tensor:
        self.forward_passes += 1
        out = self.model(decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=self_conditioning)
        return out.logits  # [N, C, V]

    def _encode_canvas(self, canvas: torch.Tensor, cache, start: int) -> None:
        positions = torch.arange(start, start + canvas.shape[1], device=self.device)[None]
        self.model.model.encoder(input_ids=canvas, past_key_values=cache, position_ids=positions)

    def _all_stopped(self, canvas: torch.Tensor) -> bool:
        stops = torch.tensor(sorted(self.format.stop_ids), device=canvas.device)
        return bool(torch.isin(canvas, stops).any(-1).all())

    def _candidates(self, tokens: torch.Tensor, confidence: torch.Tensor, steps: torch.Tensor, row_lengths: list[int],
                    holes, pinned_rows: list[int] | None = None) -> list[Candidate]:
        return cands.build(self.tokenizer, self.format.stop_ids, self._stop, tokens, confidence, steps,
                           row_lengths, holes, pinned_rows)

    def draft_text(self, canvas_row: list[int]) -> str:
        """The text of a draft canvas up to its first stop token (for refining ghost text)."""
        return cands.plain_text(self.tokenizer, self.format.stop_ids,
                                canvas_row[: cands.first_stop(canvas_row, self.format.stop_ids)])


def load_engine(config: EngineConfig) -> Engine:
    """Resolve, check and load the configured model; raises a `ModelLoadError` subclass on failure.

    With `engine = "remote"` nothing is loaded: the engine is a client of the configured server.
    """
    if config.engine == "remote":
        from .remote import connect

        return connect(config)
    path = resolve_source(config.model)
    fmt = checkpoint_format(check_directory(path))
    torch.set_num_threads(config.torch_threads())
    requested, precision = config, None
    if config.quantization == "auto":
        # The fastest measured precision on the CPU; on a GPU (bf16) or a quantized checkpoint, none.
        if placement(replace(config, quantization="none")).device.type == "cpu" and config.dtype == "auto" \
                and not fmt.prequantized:
            precision = choose_precision(config, path)
            config = replace(config, dtype=precision.dtype, quantization=precision.quantization)
        else:
            config = replace(config, quantization="none")
    where = placement(config)
    adapter: dict = {}
    try:
        model, tokenizer = load_model(path, where, config.adapter)
        if config.adapter:
            from .adapt.adapter import read_info

            adapter = {"path": config.adapter, **read_info(Path(config.adapter).expanduser()).describe()}
    except AdapterError as exc:
        # A bad adapter must not cost the user their completions: the base model serves instead.
        model, tokenizer = load_model(path, where)
        adapter = {"path": config.adapter, "error": str(exc)}
    engine = Engine(model, tokenizer, requested, source=config.model if config.model != "embedded" else "embedded",
                    quantization=describe(fmt, where.quantization, where.dtype))
    engine.defaults = replace(engine.defaults, renoise_below=tuned_renoise_below(path),
                              lead_tokens=tuned_lead_tokens(path), lead_line=tuned_lead_line(path),
                              lead_stop=tuned_lead_stop(path), lead_beam=config.lead_beam or tuned_lead_beam(path),
                              lead_margin=tuned_lead_margin(path))
    if engine.defaults.lead_tokens and engine.defaults.heal:
        engine.healer.warm()
    engine.adapter = adapter
    engine.precision = precision.describe() if precision else ""
    return engine
