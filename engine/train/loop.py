"""The training loop: AdamW, a learning-rate schedule, validation, checkpoints, CSV log.

Two layouts share the loop: `blocks` (the block-parallel objective of `blocks.py` over the rows of
`sequences.py`, every token carrying a loss) and `canvas` (the earlier one-canvas objective, kept to
measure against). Every source of randomness is derived from (seed, step): the rows, the block
size, the noise and the self-conditioning coins, so a resumed run sees the batches an
uninterrupted one would have. With the `piece` schedule the learning rate follows the time left in
this invocation (warm up, hold, anneal before the time limit), so a run cut into pieces of a few
hours ends every piece with annealed weights worth exporting.

The anneal of a piece is a branch, not the run's own path (`keeps_trunk`): the checkpoint taken
where the anneal begins (the trunk, still at the peak learning rate) is the one the run continues
from, while the annealed weights go only to the export. Continuing from annealed weights would
warm back up to the peak first and give most of each piece's anneal back; from the trunk, pieces
add up as one run at a constant learning rate would, and every piece still ends with an annealed
model to score (warmup-stable-decay with the decay branched off).
"""

from __future__ import annotations

import csv
import math
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from ..precision import cpu_has_bf16
from ..prompt import FimFormat
from .checkpoint import apply_state, export_model, latest_checkpoint, load_checkpoint, save_checkpoint
from .examples import ExampleSource
from .heap import HeapTrimmer, memory_available
from .blocks import block_ar_loss, block_diffusion_loss
from .objective import LossParts, ObjectiveConfig, ar_batch, ar_loss, collate, diffusion_loss
from .parallel import Ranks
from .sequences import canvas_batch

# The step count of a run bounded by its minutes only: no step limit, and no bar total to count down.
UNBOUNDED_STEPS = 10**9

CSV_FIELDS = ("step", "elapsed_s", "loss", "diffusion_loss", "ar_loss", "tokens_per_s", "loss_tokens_per_s",
              "lr", "val_loss", "dtype")

# Sampler defaults written to generation_config.json. Chosen for a 32-token canvas and a small
# model: few steps, low temperatures (code has few right answers), and stopping once stable.
GENERATION_DEFAULTS = {
    "max_denoising_steps": 12,
    "entropy_bound": 0.5,
    "t_min": 0.05,
    "t_max": 0.3,
    "stability_threshold": 1,
    "confidence_threshold": 0.01,
}


@dataclass
class TrainConfig:
    """Everything a run depends on; stored in the checkpoint's JSON for the record."""

    out: str
    steps: int = 4000
    batch_size: int = 8
    lr: float = 2e-3
    warmup: int = 200
    weight_decay: float = 0.01
    seed: int = 0
    objective: str = "diffusion"
    size: str = "small"
    time_limit_min: float | None = None
    save_every: int = 250
    val_every: int = 250
    val_batches: int = 8
    # Rows per held-out batch, apart from `batch_size`: the held-out loss of a piece trained at
    # another batch size must be measured on the same rows to compare with the curve.
    val_rows: int = 8
    log_every: int = 10
    grad_clip: float = 1.0
    canvas_draws: int = 1
    aux_weight: float = ObjectiveConfig.aux_weight  # the next-token loss's weight (`objective.py`)
    bf16: bool = False
    layout: str = "blocks"
    dtype: str = "fp32"
    schedule: str = "cosine"
    decay_share: float = 0.2
    # Minutes of this invocation (a piece of a longer run); `time_limit_min` counts all pieces.
    piece_minutes: float | None = None
    # Tokens processed in all pieces together, at most: a baseline trained to another run's budget.
    max_tokens: int | None = None


def lr_at(step: int, cfg: TrainConfig, first_step: int = 0, time_share: float = 0.0) -> float:
    """The learning rate of a step.

    `cosine`: linear warmup to `lr`, cosine decay to 10% of it at `steps`.
    `piece`: warmup over `warmup` steps from this invocation's first step, `lr` held, then a
    linear anneal to 10% over the last `decay_share` of the invocation's time limit
    (`time_share` is the share of it already spent)."""
    if cfg.schedule == "piece":
        ramp = min(1.0, (step - first_step + 1) / max(1, cfg.warmup))
        into_decay = (time_share - (1 - cfg.decay_share)) / cfg.decay_share
        return cfg.lr * ramp * (1.0 - 0.9 * min(1.0, max(0.0, into_decay)))
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def keeps_trunk(cfg: TrainConfig) -> bool:
    """Whether this run's anneal is a branch off the trunk it continues from: pieces bounded by
    their minutes. A run to a token budget (the AR baseline) anneals once, at its end, as a whole."""
    return cfg.schedule == "piece" and cfg.piece_minutes is not None and cfg.max_tokens is None


def step_loss(model, source, cfg: TrainConfig, step: int, seed: int, device,
              draws: int = 1, ranks: Ranks = Ranks()) -> tuple[LossParts, int, int]:
    """The loss of the batch of one step (this rank's rows of it), the tokens it processed and
    those with a diffusion loss."""
    if cfg.layout == "blocks":
        batch = source.batch(seed, step, cfg.batch_size, ranks.share(cfg.batch_size)).to(device)
        if cfg.objective == "ar":
            return block_ar_loss(model, batch), batch.num_tokens, 0
        generator = torch.Generator().manual_seed(ranks.noise_seed(seed * 7_919 + step))
        objective = ObjectiveConfig(aux_weight=cfg.aux_weight)
        return block_diffusion_loss(model, batch, generator, objective), batch.num_tokens, batch.loss_tokens
    fmt: FimFormat = source.fmt
    examples = source.batch_examples(seed, step, cfg.batch_size)
    pad, end = fmt.specials.pad, fmt.specials.end_of_middle
    if cfg.objective == "ar":
        batch, middle = ar_batch(examples, pad, end)
        batch = batch.to(device)
        return ar_loss(model, batch, middle.to(device)), int(batch.attention_mask.sum()), 0
    batch = collate(examples, pad).to(device)
    generator = torch.Generator().manual_seed(seed * 7_919 + step)
    parts = diffusion_loss(model, batch, end, generator, ObjectiveConfig(canvas_draws=draws, aux_weight=cfg.aux_weight))
    return parts, batch.num_tokens + (draws - 1) * batch.canvas.numel(), batch.canvas.numel() * draws


class StopSignals:
    """Ctrl-C or SIGTERM asks a run to stop after the step it is in, which then ends as at a time
    limit (checkpoint, export, resume state), so stopping by hand loses nothing; a second signal
    stops at once. Used as `should_stop`; outside the main thread it installs nothing."""

    def __init__(self, log=print) -> None:
        self.log = log
        self.requested = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.log(f"{signal.Signals(signum).name}: stopping after this step (send it again to stop at once)")

    def __call__(self) -> bool:
        return self.requested


class MemoryGuard:
    """Ends a run as a time limit would when the machine is about to run out of memory.

    Without swap, the kernel first evicts every file page it can, and a step then takes minutes
    instead of seconds (seen on two 12 GB processes on a 24 GB machine) until the OOM killer takes
    the run and its last steps. Asked after every step on every rank; any rank's "stop" stops all
    (`Ranks.agree`), so the checkpoint, export and resume state are written while there is room."""

    def __init__(self, log=print, min_available_share: float = 0.06, meminfo: str = "/proc/meminfo") -> None:
        self.log, self.share, self.meminfo = log, min_available_share, meminfo
        self.requested = False

    def available(self) -> tuple[int, int] | None:
        """(MemAvailable, MemTotal) in kB, or None where the kernel does not say (not Linux)."""
        return memory_available(self.meminfo)

    def __call__(self) -> bool:
        if not self.requested and (memory := self.available()) is not None:
            available, total = memory
            if available < self.share * total:
                self.requested = True
                self.log(f"memory: {available // 1024:,} MB of {total // 1024:,} MB left; stopping after this step "
                         "(`continue` goes on from here in a fresh process)")
        return self.requested


def any_of(*checks):
    """One `should_stop` from several; each is asked every time, so each can log its reason."""
    present = [c for c in checks if c is not None]
    return lambda: any([c() for c in present])


def resolve_dtype(requested: str, device: str) -> str:
    """`auto`: bf16 autocast on a CUDA GPU that has it or a CPU with bf16 hardware, else fp32."""
    if requested in ("bf16", "fp32"):
        return requested
    if str(device).startswith("cuda"):
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_bf16() else "fp32"


def autocast(cfg: TrainConfig, device: str):
    """bf16 autocast when chosen; the weights and the optimizer stay fp32, so a run can switch it
    on or off when it resumes."""
    kind = "cuda" if str(device).startswith("cuda") else "cpu"
    return torch.autocast(kind, dtype=torch.bfloat16, enabled=cfg.bf16 or cfg.dtype == "bf16")


@torch.no_grad()
def validate(model, source: ExampleSource, cfg: TrainConfig, device) -> float:
    """Mean main loss on fixed held-out batches (same batches and noise at every validation).

    It always runs in fp32 on one-canvas FIM holes (the blocks layout lays them out as one block
    after the prompt, which gives the old objective's loss), so runs trained with other settings
    and layouts are compared on the same measure."""
    model.eval()
    losses = []
    for i in range(cfg.val_batches):
        if cfg.layout == "blocks" and cfg.objective == "diffusion":
            s = source.fmt.specials
            batch = canvas_batch(source.batch_examples(10_007, i, cfg.val_rows), s.pad, s.end_of_middle).to(device)
            losses.append(block_diffusion_loss(model, batch, torch.Generator().manual_seed(10_007 * 7_919 + i)).main.item())
        else:
            old = TrainConfig(**{**asdict(cfg), "layout": "canvas", "batch_size": cfg.val_rows})
            losses.append(step_loss(model, source, old, i, seed=10_007, device=device)[0].main.item())
    model.train()
    return sum(losses) / len(losses)


def optimizer_order(model) -> list[tuple[str, torch.nn.Parameter]]:
    """The parameters in the optimizer's order (its state's indices): matrices, then the 1-D
    tensors (norms, scales, biases) that take no weight decay."""
    named = list(model.named_parameters())
    return [(n, p) for n, p in named if p.ndim >= 2] + [(n, p) for n, p in named if p.ndim < 2]


def make_optimizer(model, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW without weight decay on norms, scales and biases (1-D tensors)."""
    params = optimizer_order(model)
    decay = [p for _, p in params if p.ndim >= 2]
    plain = [p for _, p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": plain, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8)


def piece_share(cfg: TrainConfig, piece_s: float, tokens: int, first_tokens: int) -> float:
    """How far this invocation is through its limits (0-1): its minutes, or its token budget when
    that runs out first, so that the piece schedule anneals before whichever ends the run."""
    share = piece_s / (cfg.piece_minutes * 60) if cfg.piece_minutes else 0.0
    if cfg.max_tokens is not None and cfg.max_tokens > first_tokens:
        share = max(share, (tokens - first_tokens) / (cfg.max_tokens - first_tokens))
    return min(1.0, share)


def _time_left(cfg: TrainConfig, state: dict, piece_s: float) -> float | None:
    """Seconds of training left before a time limit ends this invocation (None: no limit)."""
    limits = []
    if cfg.time_limit_min is not None:
        limits.append(cfg.time_limit_min * 60 - state["elapsed_s"])
    if cfg.piece_minutes is not None:
        limits.append(cfg.piece_minutes * 60 - piece_s)
    return min(limits) if limits else None


def train(model, tokenizer, train_source, val_source: ExampleSource | None, cfg: TrainConfig,
          device: str = "cpu", export_dir: str | None = None, progress: bool = True,
          start: tuple[dict, dict] | None = None, should_stop=None, on_step=None, ranks: Ranks = Ranks()) -> dict:
    """Run (or resume) training until `steps` or a time limit; returns the final JSON state.

    `start` is (weights, flat optimizer state, JSON state) to begin from when the run directory has no checkpoint:
    the committed state of a run continued on a fresh machine (see `resume.py`). `should_stop()` is
    asked after every step; when it says so, a checkpoint is saved and the run ends as if out of
    time. `on_step(state, loss)` is told about every step (a progress report). With several
    `ranks` (`parallel.py`) every rank runs this loop on its share of each batch; only rank 0
    writes the log, checkpoints and export, and validates. A piece's anneal writes no checkpoint
    (`keeps_trunk`): a run stopped during it, or continued after it, goes on from the trunk."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    model.to(device).train()
    optimizer = make_optimizer(model, cfg)
    state = {"step": 0, "seed": cfg.seed, "elapsed_s": 0.0, "config": asdict(cfg)}
    resume = latest_checkpoint(out)
    if resume is not None:
        state = load_checkpoint(resume, model, optimizer)
    elif start is not None:
        state = apply_state(start, model, optimizer)
    state["config"] = asdict(cfg)
    log_path = out / "log.csv"
    new_log = not log_path.exists()
    log_file = open(log_path if ranks.main else os.devnull, "a", newline="")
    writer = csv.writer(log_file)
    if new_log and ranks.main:
        writer.writerow(CSV_FIELDS)
    progress = progress and ranks.main
    if not ranks.main:
        val_source, export_dir = None, None
    start_wall, start_elapsed, first_step = time.time(), state["elapsed_s"], state["step"]
    first_tokens = state.get("tokens", 0)
    # A run bounded by minutes shows its time left in the postfix; a step total would promise an ETA of years.
    bar = tqdm(total=None if cfg.steps >= UNBOUNDED_STEPS else cfg.steps, initial=state["step"], disable=not progress,
               dynamic_ncols=True)
    tokens_window, loss_window, window_start = 0, 0, time.time()
    # Seconds into this piece by rank 0's clock, which sets every rank's learning rate alike.
    piece_s = 0.0
    trim_heap = HeapTrimmer()
    # Once the anneal begins this piece is on its branch: the trunk's checkpoint is the last one written.
    branched = False
    try:
        while state["step"] < cfg.steps and state.get("tokens", 0) < (cfg.max_tokens or float("inf")):
            step = state["step"]
            share = piece_share(cfg, piece_s, state.get("tokens", 0), first_tokens)
            if not branched and keeps_trunk(cfg) and share > 1 - cfg.decay_share:
                branched = True
                if ranks.main:
                    save_checkpoint(out, model, optimizer, state)
            lr = lr_at(step, cfg, first_step, share)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with autocast(cfg, device):
                parts, n_tokens, n_loss = step_loss(model, train_source, cfg, step, cfg.seed, device, cfg.canvas_draws,
                                                    ranks)
            optimizer.zero_grad(set_to_none=True)
            parts.total.backward()
            ranks.average_gradients(model)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            state["step"] = step + 1
            trim_heap(state["step"])
            state["elapsed_s"] = start_elapsed + time.time() - start_wall
            left = _time_left(cfg, state, time.time() - start_wall)
            stop = (left is not None and left <= 0) or bool(should_stop and should_stop())
            out_of_time, n_tokens, n_loss, piece_s = ranks.agree(stop, n_tokens, n_loss, time.time() - start_wall)
            tokens_window += n_tokens
            loss_window += n_loss
            state["tokens"] = state.get("tokens", 0) + n_tokens
            # Every rank adds the same agreed count, so all of them stop at the same step.
            out_of_time = out_of_time or (cfg.max_tokens is not None and state["tokens"] >= cfg.max_tokens)
            window_s = max(1e-9, time.time() - window_start)
            bar.update(1)
            bar.set_postfix(loss=f"{parts.total.item():.3f}", tok_s=f"{tokens_window / window_s:.0f}",
                            lr=f"{lr:.2e}", left="-" if left is None else f"{max(0.0, left) / 60:.0f}m")
            if on_step is not None:
                on_step(state, parts.total.item())
            done = state["step"] >= cfg.steps
            val_loss = ""
            if val_source is not None and (state["step"] % cfg.val_every == 0 or done or out_of_time):
                val_loss = f"{validate(model, val_source, cfg, device):.4f}"
            # With several ranks the losses logged are rank 0's rows', the token rates all ranks'.
            if ranks.main and (state["step"] % cfg.log_every == 0 or val_loss):
                writer.writerow([state["step"], f"{state['elapsed_s']:.1f}", f"{parts.total.item():.4f}",
                                 f"{parts.main.item():.4f}", f"{parts.aux.item():.4f}",
                                 f"{tokens_window / window_s:.0f}", f"{loss_window / window_s:.0f}",
                                 f"{lr:.6g}", val_loss, "bf16" if cfg.bf16 or cfg.dtype == "bf16" else "fp32"])
                log_file.flush()
                tokens_window, loss_window, window_start = 0, 0, time.time()
            if ranks.main and not branched and (state["step"] % cfg.save_every == 0 or done or out_of_time):
                save_checkpoint(out, model, optimizer, state)
            if out_of_time:
                break
    finally:
        bar.close()
        log_file.close()
    if export_dir:
        export_model(model, tokenizer, Path(export_dir), GENERATION_DEFAULTS)
    return state
