"""Training throughput: the one-canvas trainer against the block-parallel one, and the CPU's peak.

In one run, on one machine, at one model size, this times whole optimizer steps (forward,
backward, AdamW) of

* the one-canvas trainer (`--layout canvas`) as the shipped model was trained: four noisy canvas
  draws per prompt, a batch of 8 FIM holes (and with one draw, the trainer's default);
* the block-parallel trainer (`--layout blocks`): rows of `--seq-len` tokens, every block noised,
  in one process of `--threads` threads and, as the long run trains, in `--procs` processes that
  share each batch (`dg_engine.train.parallel`): the headline `new_*` figures are the latter's;

and a square matmul in fp32 and bf16, the machine's practical peak. Model FLOPs are counted by
`torch.utils.flop_counter.FlopCounterMode` over one real step (both passes, the self-conditioning
pass and attention included; attention is counted as executed, dense over the masked keys), so
their share of the peak is what the step achieves of what the hardware offers.

    python -m benchmarks.training_throughput [--size base] [--steps 6] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from dg_engine.prompt import FimFormat
from dg_engine.tokens import special_tokens
from dg_engine.train.corpus import split
from dg_engine.train.examples import ExampleConfig, ExampleSource
from dg_engine.train.heap import keep_freed_memory
from dg_engine.train.loop import TrainConfig, autocast, make_optimizer, resolve_dtype, step_loss
from dg_engine.train.model import build_model, count_parameters
from dg_engine.train.parallel import Ranks, launch, threads_per_rank
from dg_engine.train.sequences import BlockSource, MixConfig
from dg_engine.train.tokenizer import load_tokenizer

RESULTS = Path(__file__).parent / "results" / "training_throughput.json"
EMBEDDED = Path(__file__).resolve().parents[1] / "engine" / "embedded"


def matmul_tflops(dtype: torch.dtype, n: int, repeats: int) -> float:
    """TFLOPS of an n x n x n matmul in `dtype` (best of `repeats`)."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e12


def sources(limit: int | None, seq_len: int):
    """The FIM source and a code stream from the standard library (speed does not depend on data)."""
    tokenizer = load_tokenizer(EMBEDDED)
    fmt = FimFormat(tokenizer, special_tokens(tokenizer))
    files, _ = split(limit=limit)
    fim = ExampleSource(files, fmt, ExampleConfig(max_prompt_tokens=seq_len - 128 if seq_len < 1024 else 768))
    ids = tokenizer("".join(f.text for f in files[:200]), add_special_tokens=False)["input_ids"]
    stream = np.asarray(ids, dtype=np.uint16)
    return tokenizer, fim, BlockSource(fim, stream, None, MixConfig(seq_len=seq_len, prose_share=0.0))


def time_trainer(model, source, cfg: TrainConfig, steps: int, warmup: int, ranks: Ranks = Ranks()) -> dict:
    """Seconds per optimizer step and tokens per second (of all ranks) over `steps` timed steps."""
    optimizer = make_optimizer(model, cfg)
    model.train()
    spent, tokens, loss_tokens = 0.0, 0, 0
    for step in range(warmup + steps):
        start = time.perf_counter()
        with autocast(cfg, "cpu"):
            parts, n, n_loss = step_loss(model, source, cfg, step, 0, "cpu", cfg.canvas_draws, ranks)
        optimizer.zero_grad(set_to_none=True)
        parts.total.backward()
        ranks.average_gradients(model)
        optimizer.step()
        _, n, n_loss, _ = ranks.agree(False, n, n_loss, 0.0)
        if step >= warmup:
            spent += time.perf_counter() - start
            tokens, loss_tokens = tokens + n, loss_tokens + n_loss
    return {"s_per_step": spent / steps, "tokens_per_s": tokens / spent, "loss_tokens_per_s": loss_tokens / spent,
            "loss_token_share": loss_tokens / tokens}


def time_ranks(args, ranks: Ranks) -> dict:
    """One rank of the block-parallel trainer on `ranks.world` processes of `args.threads // world`
    threads each (`--procs`, as `python -m dg_engine.train --procs N` runs it)."""
    torch.set_num_threads(threads_per_rank(ranks.world, max(1, args.threads // ranks.world)))
    keep_freed_memory()
    tokenizer, _, blocks = sources(40 if args.quick else None, args.seq_len)
    cfg = TrainConfig(out="", batch_size=args.batch_size, size=args.size, dtype=args.resolved_dtype, layout="blocks")
    return time_trainer(build_model(args.size, len(tokenizer), seed=0), blocks, cfg, args.steps, args.warmup, ranks)


def step_flops(model, source, cfg: TrainConfig, step: int) -> tuple[float, int]:
    """FLOPs of one training step (forward and backward) and the tokens it processed."""
    with FlopCounterMode(display=False) as counter:
        with autocast(cfg, "cpu"):
            parts, n, _ = step_loss(model, source, cfg, step, 0, "cpu", cfg.canvas_draws)
        parts.total.backward()
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops()), n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.training_throughput", description=__doc__.splitlines()[0])
    p.add_argument("--size", default="base")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8, help="rows of the block-parallel trainer")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--old-batch-size", type=int, default=8)
    p.add_argument("--old-draws", type=int, default=4)
    p.add_argument("--dtype", default="auto", choices=("auto", "bf16", "fp32"))
    p.add_argument("--procs", type=int, default=2, help="processes of the data-parallel block trainer (1: skip it)")
    p.add_argument("--quick", action="store_true", help="tiny model, two steps each, a throwaway output")
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    if args.quick:
        args.size, args.steps, args.warmup, args.batch_size, args.seq_len = "tiny", 1, 1, 2, 128
        args.old_batch_size, args.out = 2, str(Path(args.out).with_name("training_throughput.quick.json"))
    torch.set_num_threads(args.threads)
    keep_freed_memory()
    dtype = resolve_dtype(args.dtype, "cpu")
    tokenizer, fim, blocks = sources(40 if args.quick else None, args.seq_len)
    base = TrainConfig(out="", batch_size=args.batch_size, size=args.size, dtype=dtype)
    old_cfg = replace(base, layout="canvas", batch_size=args.old_batch_size, canvas_draws=args.old_draws)
    one_draw = replace(old_cfg, canvas_draws=1)
    new_cfg = replace(base, layout="blocks")
    results: dict = {}
    for name, cfg, source in (("old", old_cfg, fim), ("old_one_draw", one_draw, fim), ("new", new_cfg, blocks)):
        model = build_model(args.size, len(tokenizer), seed=0)
        timing = time_trainer(model, source, cfg, args.steps, args.warmup)
        flops, n = step_flops(model, source, cfg, 10_000)
        timing["flops_per_token"] = flops / n
        timing["flops_per_loss_token"] = timing["flops_per_token"] / timing["loss_token_share"]
        timing["model_tflops"] = timing["flops_per_token"] * timing["tokens_per_s"] / 1e12
        results[name] = timing
        print(f"{name}: {timing['s_per_step']:.2f} s/step, {timing['tokens_per_s']:.0f} tokens/s, "
              f"{timing['loss_tokens_per_s']:.0f} loss tokens/s, {timing['model_tflops']:.3f} TFLOPS", flush=True)
    if args.procs > 1:
        args.resolved_dtype = dtype
        timing = launch(time_ranks, args, args.procs)
        timing["flops_per_token"] = results["new"]["flops_per_token"]
        timing["flops_per_loss_token"] = timing["flops_per_token"] / timing["loss_token_share"]
        timing["model_tflops"] = timing["flops_per_token"] * timing["tokens_per_s"] / 1e12
        results["new_one_process"], results["new"] = results["new"], timing
        print(f"new on {args.procs} processes: {timing['s_per_step']:.2f} s/step, {timing['tokens_per_s']:.0f} tokens/s, "
              f"{timing['model_tflops']:.3f} TFLOPS", flush=True)
    n = 256 if args.quick else 2048
    peaks = {"fp32": matmul_tflops(torch.float32, n, 5), "bf16": matmul_tflops(torch.bfloat16, n, 5)}
    old, new = results["old"], results["new"]
    parameters = count_parameters(build_model(args.size, len(tokenizer), seed=0))
    record = {
        "size": args.size,
        "parameters": parameters,
        "threads": args.threads,
        "dtype": dtype,
        "cpu": platform.processor() or platform.machine(),
        "old_config": {"layout": "canvas", "batch_size": args.old_batch_size, "canvas_draws": args.old_draws},
        "new_config": {"layout": "blocks", "batch_size": args.batch_size, "seq_len": args.seq_len,
                       "processes": args.procs, "threads_per_process": max(1, args.threads // args.procs)},
        "new_one_process_tokens_per_s": results.get("new_one_process", results["new"])["tokens_per_s"],
        "old_loss_tokens_per_s": old["loss_tokens_per_s"],
        "new_loss_tokens_per_s": new["loss_tokens_per_s"],
        "old_tokens_per_s": old["tokens_per_s"],
        "new_tokens_per_s": new["tokens_per_s"],
        "loss_tokens_ratio": new["loss_tokens_per_s"] / old["loss_tokens_per_s"],
        "loss_tokens_ratio_one_draw": new["loss_tokens_per_s"] / results["old_one_draw"]["loss_tokens_per_s"],
        # The ratio each trainer's FLOPs per diffusion-loss token allow at the same share of the
        # peak: how much of the ratio comes from the layout rather than from running faster.
        "loss_tokens_ratio_at_equal_efficiency": old["flops_per_loss_token"] / new["flops_per_loss_token"],
        "loss_tokens_ratio_one_draw_at_equal_efficiency":
            results["old_one_draw"]["flops_per_loss_token"] / new["flops_per_loss_token"],
        # The least a diffusion-loss token can cost: one forward and backward of the model on it
        # (6 FLOPs per parameter), with no clean pass, no prompt and no self-conditioning.
        "min_flops_per_loss_token": 6.0 * parameters,
        "old_loss_token_share": old["loss_token_share"],
        "loss_token_share": new["loss_token_share"],
        "old_model_tflops": old["model_tflops"],
        "model_tflops": new["model_tflops"],
        "flops_per_token": new["flops_per_token"],
        "peak_tflops": peaks[dtype],
        "peak_tflops_fp32": peaks["fp32"],
        "peak_tflops_bf16": peaks["bf16"],
        "peak_share": new["model_tflops"] / peaks[dtype],
        "old_peak_share": old["model_tflops"] / peaks[dtype],
        "steps_timed": args.steps,
        "details": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"loss tokens/s {record['loss_tokens_ratio']:.1f}x the old trainer; {record['loss_token_share']:.0%} of "
          f"tokens carry the diffusion loss; {record['peak_share']:.0%} of the {dtype} matmul peak "
          f"({peaks[dtype]:.2f} TFLOPS)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
