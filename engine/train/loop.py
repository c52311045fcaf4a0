"""The training loop: AdamW with warmup and cosine decay, validation, checkpoints, CSV log.

Every source of randomness is derived from (seed, step): the batch's examples, the canvas length,
the noise and the self-conditioning coin flips. Two runs with the same seed and steps therefore end
with the same weights, and a run resumed from a checkpoint continues exactly as if uninterrupted.
"""

from __future__ import annotations

import csv
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from ..prompt import FimFormat
from .checkpoint import export_model, latest_checkpoint, load_checkpoint, save_checkpoint
from .examples import ExampleSource
from .objective import LossParts, ObjectiveConfig, ar_batch, ar_loss, collate, diffusion_loss

CSV_FIELDS = ("step", "elapsed_s", "loss", "diffusion_loss", "ar_loss", "tokens_per_s", "lr", "val_loss")

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
    log_every: int = 10
    grad_clip: float = 1.0
    canvas_draws: int = 1
    bf16: bool = False


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to `lr`, then cosine decay to 10% of it at `steps`."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def step_loss(model, source: ExampleSource, cfg: TrainConfig, step: int, seed: int, device,
              draws: int = 1) -> tuple[LossParts, int]:
    """The loss of the batch of one step and the number of tokens it processed."""
    fmt: FimFormat = source.fmt
    examples = source.batch_examples(seed, step, cfg.batch_size)
    pad, end = fmt.specials.pad, fmt.specials.end_of_middle
    if cfg.objective == "ar":
        batch, middle = ar_batch(examples, pad, end)
        batch = batch.to(device)
        return ar_loss(model, batch, middle.to(device)), int(batch.attention_mask.sum())
    batch = collate(examples, pad).to(device)
    generator = torch.Generator().manual_seed(seed * 7_919 + step)
    parts = diffusion_loss(model, batch, end, generator, ObjectiveConfig(canvas_draws=draws))
    return parts, batch.num_tokens + (draws - 1) * batch.canvas.numel()


def autocast(cfg: TrainConfig, device: str):
    """bf16 autocast when asked: on a CPU with AVX-512 BF16 it trained 1.2-1.3x more tokens per second.
    The weights and the optimizer stay fp32, so a run can switch it on or off when it resumes."""
    kind = "cuda" if str(device).startswith("cuda") else "cpu"
    return torch.autocast(kind, dtype=torch.bfloat16, enabled=cfg.bf16)


@torch.no_grad()
def validate(model, source: ExampleSource, cfg: TrainConfig, device) -> float:
    """Mean main loss on fixed held-out batches (same batches and noise at every validation).

    It always runs in fp32 with one canvas draw, so runs trained with other settings are compared
    on the same measure."""
    model.eval()
    losses = [step_loss(model, source, cfg, i, seed=10_007, device=device)[0].main.item() for i in range(cfg.val_batches)]
    model.train()
    return sum(losses) / len(losses)


def make_optimizer(model, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW without weight decay on norms, scales and biases (1-D tensors)."""
    params = list(model.parameters())
    decay = [p for p in params if p.ndim >= 2]
    plain = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": plain, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8)


def train(model, tokenizer, train_source: ExampleSource, val_source: ExampleSource | None, cfg: TrainConfig,
          device: str = "cpu", export_dir: str | None = None, progress: bool = True) -> dict:
    """Run (or resume) training until `steps` or the time limit; returns the final JSON state."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    model.to(device).train()
    optimizer = make_optimizer(model, cfg)
    state = {"step": 0, "seed": cfg.seed, "elapsed_s": 0.0, "config": asdict(cfg)}
    resume = latest_checkpoint(out)
    if resume is not None:
        state = load_checkpoint(resume, model, optimizer)
        state["config"] = asdict(cfg)
    log_path = out / "log.csv"
    new_log = not log_path.exists()
    log_file = open(log_path, "a", newline="")
    writer = csv.writer(log_file)
    if new_log:
        writer.writerow(CSV_FIELDS)
    start_wall, start_elapsed = time.time(), state["elapsed_s"]
    bar = tqdm(total=cfg.steps, initial=state["step"], disable=not progress, dynamic_ncols=True)
    tokens_window, window_start = 0, time.time()
    try:
        while state["step"] < cfg.steps:
            step = state["step"]
            lr = lr_at(step, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with autocast(cfg, device):
                parts, n_tokens = step_loss(model, train_source, cfg, step, cfg.seed, device, cfg.canvas_draws)
            optimizer.zero_grad(set_to_none=True)
            parts.total.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            state["step"] = step + 1
            state["elapsed_s"] = start_elapsed + time.time() - start_wall
            tokens_window += n_tokens
            tokens_per_s = tokens_window / max(1e-9, time.time() - window_start)
            bar.update(1)
            bar.set_postfix(loss=f"{parts.total.item():.3f}", tok_s=f"{tokens_per_s:.0f}")
            done = state["step"] >= cfg.steps
            out_of_time = cfg.time_limit_min is not None and state["elapsed_s"] >= cfg.time_limit_min * 60
            val_loss = ""
            if val_source is not None and (state["step"] % cfg.val_every == 0 or done or out_of_time):
                val_loss = f"{validate(model, val_source, cfg, device):.4f}"
            if state["step"] % cfg.log_every == 0 or val_loss:
                writer.writerow([state["step"], f"{state['elapsed_s']:.1f}", f"{parts.total.item():.4f}",
                                 f"{parts.main.item():.4f}", f"{parts.aux.item():.4f}", f"{tokens_per_s:.0f}",
                                 f"{lr:.6g}", val_loss])
                log_file.flush()
                tokens_window, window_start = 0, time.time()
            if state["step"] % cfg.save_every == 0 or done or out_of_time:
                save_checkpoint(out, model, optimizer, state)
            if out_of_time:
                break
    finally:
        bar.close()
        log_file.close()
    if export_dir:
        export_model(model, tokenizer, Path(export_dir), GENERATION_DEFAULTS)
    return state
