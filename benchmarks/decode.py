"""Decode efficiency: the diffusion decoder against the same-size autoregressive baseline.

The reason to use a diffusion model for infill is that it writes several tokens per forward pass.
This benchmark checks that this turns into wall-clock time on real holes, without losing
accuracy. Cases are middles of exactly 8, 32, 64 and 128 tokens cut from held-out modules, with
their prefix and suffix. Each case is filled by `Engine.fill` (as many canvases as the length
needs, cold prefill) and by `ar_generate` on the AR baseline (same backbone and data, trained as a
causal LM on the same suffix-first FIM prompt, greedy, same token budget). Recorded per length:
wall time p50/p95/p99 of both, the speedup (AR wall / diffusion wall, both measured in this run),
decoder steps and tokens per forward, and exact match of the first line and of the whole middle.

    python -m benchmarks.decode [--quick] [--model embedded] [--ar-model DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import torch

from . import common
from .fixtures import ar_model_dir, model_label, resolve_model, token_spans, tiny_model_dir, use_threads

TARGETS = {"length": 64, "speedup": 3.0, "tokens_per_forward": 4.0}


def _norm(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().split("\n"))


def matches(pred: str, gold: str) -> tuple[bool, bool]:
    """(first line equal, whole middle equal), ignoring trailing whitespace."""
    first = pred.split("\n", 1)[0].rstrip() == gold.split("\n", 1)[0].rstrip()
    return first, _norm(pred) == _norm(gold)


def run_diffusion(engine, span, canvases: int):
    from dg_engine import FillRequest

    started = time.perf_counter()
    result = engine.fill(FillRequest(span.prefix, span.suffix, max_canvases=canvases, reuse_cache=False, seed=0))
    wall = (time.perf_counter() - started) * 1000
    best = result.candidates[0]
    return wall, best.text, best.steps, best.tokens_per_forward, result, len(best.token_ids)


def run_ar(ar_engine, span, budget: int):
    from dg_engine.autoregressive import ar_generate

    prompt = ar_engine.format.infill_ids(span.prefix, span.suffix)
    started = time.perf_counter()
    ids, passes, timings = ar_generate(ar_engine.model, prompt, budget, set(ar_engine.format.stop_ids))
    wall = (time.perf_counter() - started) * 1000
    text = ar_engine.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    return wall, text, passes, len(ids), timings


def ar_source(args) -> tuple[str | None, str]:
    if args.ar_model:
        return (str(tiny_model_dir()) if args.ar_model == "tiny" else args.ar_model), "given"
    if args.quick:
        return str(tiny_model_dir()), "tiny random model standing in for the AR baseline (quick mode)"
    found = ar_model_dir()
    if found is not None:
        return str(found), "trained AR baseline"
    return None, "no AR baseline (runs/ar/model or benchmarks/baselines/ar); AR column skipped"


def measure_length(engine, ar_engine, length: int, cases: int, repeats: int) -> dict:
    canvas = engine.defaults.canvas_length
    canvases = math.ceil((length + 1) / canvas)
    budget = canvases * canvas
    spans = token_spans(engine.tokenizer, length, cases)
    rows = []
    for span in spans:
        row = {"module": span.module, "gold_chars": len(span.middle)}
        walls, step_ms = [], []
        for _ in range(repeats):
            wall, text, steps, tpf, result, produced = run_diffusion(engine, span, canvases)
            walls.append(wall)
            step_ms.append(result.denoise_ms / max(1, steps))
        first, whole = matches(text, span.middle)
        row["diffusion"] = {"wall_ms": round(statistics.median(walls), 2), "walls_ms": [round(w, 2) for w in walls],
                            "prefill_ms": round(result.prefill_ms, 2), "steps": steps, "tokens_per_forward": round(tpf, 3),
                            "canvases": result.canvases, "tokens": produced, "first_line_match": first, "exact_match": whole,
                            "prompt_tokens": result.prompt_tokens, "ms_per_step": round(statistics.median(step_ms), 3)}
        if ar_engine is not None:
            walls, step_ms, prefill_ms = [], [], []
            for _ in range(repeats):
                wall, ar_text, passes, produced, timings = run_ar(ar_engine, span, budget)
                walls.append(wall)
                step_ms += timings.step_ms
                prefill_ms.append(timings.prefill_ms)
            first, whole = matches(ar_text, span.middle)
            row["ar"] = {"wall_ms": round(statistics.median(walls), 2), "walls_ms": [round(w, 2) for w in walls],
                         "forward_passes": passes, "tokens": produced, "first_line_match": first, "exact_match": whole,
                         "prefill_ms": round(statistics.median(prefill_ms), 2),
                         "ms_per_step": round(statistics.median(step_ms), 3) if step_ms else None}
            row["speedup"] = round(row["ar"]["wall_ms"] / max(1e-6, row["diffusion"]["wall_ms"]), 3)
        rows.append(row)
    return summarize(length, canvases, budget, rows, ar_engine is not None, engine.defaults.max_steps)


def summarize(length, canvases, budget, rows, with_ar: bool, max_steps: int) -> dict:
    n = max(1, len(rows))
    d_walls = [w for r in rows for w in r["diffusion"]["walls_ms"]]
    out = {
        "length": length, "cases": len(rows), "max_canvases": canvases, "token_budget": budget,
        "diffusion": {
            "wall_ms": common.summary(d_walls),
            "steps_mean": round(sum(r["diffusion"]["steps"] for r in rows) / n, 2),
            "tokens_mean": round(sum(r["diffusion"]["tokens"] for r in rows) / n, 2),
            "ms_per_token": _per_token(rows, "diffusion"),
            "tokens_per_forward_mean": round(sum(r["diffusion"]["tokens_per_forward"] for r in rows) / n, 3),
            "first_line_match": round(sum(r["diffusion"]["first_line_match"] for r in rows) / n, 3),
            "exact_match": round(sum(r["diffusion"]["exact_match"] for r in rows) / n, 3),
        },
        "rows": rows,
    }
    if with_ar:
        a_walls = [w for r in rows for w in r["ar"]["walls_ms"]]
        out["ar"] = {
            "wall_ms": common.summary(a_walls),
            "forward_passes_mean": round(sum(r["ar"]["forward_passes"] for r in rows) / n, 2),
            "tokens_mean": round(sum(r["ar"]["tokens"] for r in rows) / n, 2),
            "ms_per_token": _per_token(rows, "ar"),
            "first_line_match": round(sum(r["ar"]["first_line_match"] for r in rows) / n, 3),
            "exact_match": round(sum(r["ar"]["exact_match"] for r in rows) / n, 3),
        }
        # Ratio of medians, both measured in this run on the same cases.
        out["speedup"] = round(out["ar"]["wall_ms"]["p50"] / max(1e-6, out["diffusion"]["wall_ms"]["p50"]), 3)
        # A model that stops early is fast for the wrong reason; this ratio is per token written.
        out["speedup_per_token"] = round(out["ar"]["ms_per_token"] / max(1e-6, out["diffusion"]["ms_per_token"]), 3)
        out["speedup_per_case_median"] = round(statistics.median(r["speedup"] for r in rows), 3) if rows else 0.0
        out["profile"] = profile(rows, budget // max(1, canvases), max_steps)
    return out


def profile(rows, canvas: int, max_steps: int) -> dict:
    """Where the time goes, and the speedup a model that used its whole canvas would reach.

    A denoising step runs the decoder over the whole canvas with self-conditioning, an AR step over
    one token, so a step costs more; diffusion wins only by taking fewer steps per token written.
    """
    d_step = statistics.median(r["diffusion"]["ms_per_step"] for r in rows)
    a_steps = [r["ar"]["ms_per_step"] for r in rows if r["ar"]["ms_per_step"] is not None]
    a_step = statistics.median(a_steps) if a_steps else 0.0
    d_prefill = statistics.median(r["diffusion"]["prefill_ms"] for r in rows)
    d_wall = statistics.median(r["diffusion"]["wall_ms"] for r in rows)
    ratio = d_step / max(1e-6, a_step)
    return {
        "diffusion_ms_per_step": round(d_step, 3), "ar_ms_per_step": round(a_step, 3),
        "step_cost_ratio": round(ratio, 3),
        "diffusion_prefill_ms": round(d_prefill, 2), "ar_prefill_ms": round(statistics.median(r["ar"]["prefill_ms"] for r in rows), 2),
        "diffusion_prefill_share": round(d_prefill / max(1e-6, d_wall), 3),
        "steps_per_canvas_mean": round(statistics.mean(r["diffusion"]["steps"] / r["diffusion"]["canvases"] for r in rows), 2),
        "canvas_length": canvas,
        # Decode only, per token: every canvas written in full in max_steps steps, one AR step a token.
        "full_canvas_speedup_ceiling": round(canvas / max_steps / max(1e-6, ratio), 3),
    }


def _per_token(rows, key: str) -> float:
    return round(sum(r[key]["wall_ms"] for r in rows) / max(1, sum(r[key]["tokens"] for r in rows)), 3)


def forward_scaling(engine, span, widths=(1, 8, 32, 64), repeats: int = 15) -> dict:
    """Median ms of one decoder forward over canvases of each width, with and without self-conditioning.

    On a CPU a model this small is compute-bound past a few positions: the time of a forward grows
    with the canvas, so a denoising step over 32 positions costs several AR steps of one token.
    """
    from dg_engine.kvcache import fork

    prompt = engine.format.infill_ids(span.prefix, span.suffix)
    cache = engine.prefix_cache.prefill(prompt, reuse=False).cache
    out = {}
    with torch.inference_mode():
        for width in widths:
            canvas = torch.randint(0, engine.vocab_size, (1, width), device=engine.device)  # [1, W]
            forked = fork(cache, 1)
            logits = engine._decode(canvas, None, forked)  # [1, W, V]
            for key, sc in (("plain", None), ("self_conditioned", logits)):
                walls = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    engine._decode(canvas, sc, forked)
                    walls.append((time.perf_counter() - started) * 1000)
                out.setdefault(key, {})[str(width)] = round(statistics.median(walls), 3)
    out["prompt_tokens"] = len(prompt)
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.decode", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny model as both models, two short lengths")
    p.add_argument("--model", default=None)
    p.add_argument("--ar-model", default=None, help="AR baseline directory (default runs/ar/model, else benchmarks/baselines/ar)")
    p.add_argument("--lengths", default=None, help="middle lengths in tokens (default 8,32,64,128)")
    p.add_argument("--cases", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    from dg_engine import EngineConfig, load_engine

    args = parse_args(argv)
    previous_threads = use_threads(args.threads, args.quick)
    model = resolve_model(args.model, args.quick)
    lengths = [int(x) for x in (args.lengths or ("8,16" if args.quick else "8,32,64,128")).split(",")]
    cases, repeats = (2, 1) if args.quick else (args.cases, args.repeats)
    engine = load_engine(EngineConfig(model=model))
    ar_path, ar_note = ar_source(args)
    ar_engine = load_engine(EngineConfig(model=ar_path)) if ar_path else None
    warm = token_spans(engine.tokenizer, 8, 1, seed=99)[0]
    run_diffusion(engine, warm, 1)  # warm-up: lazy initialisation is not part of any case
    if ar_engine is not None:
        run_ar(ar_engine, warm, 8)
    load_before = os.getloadavg()
    results = [measure_length(engine, ar_engine, n, cases, repeats) for n in lengths]
    scaling = forward_scaling(engine, token_spans(engine.tokenizer, 64, 1, seed=98)[0], repeats=3 if args.quick else 15)
    load_after = os.getloadavg()
    at = next((r for r in results if r["length"] == TARGETS["length"]), None)
    met = {}
    if at is not None:
        met["tokens_per_forward"] = at["diffusion"]["tokens_per_forward_mean"] >= TARGETS["tokens_per_forward"]
        if "ar" in at:
            met["speedup"] = at["speedup"] >= TARGETS["speedup"]
            met["exact_match_not_worse"] = at["diffusion"]["exact_match"] >= at["ar"]["exact_match"]
    payload = {
        "model": model_label(model),
        "ar_model": model_label(ar_path) if ar_path else None,
        "ar_available": ar_engine is not None,
        "ar_note": ar_note,
        "quick": args.quick,
        "settings": {"lengths": lengths, "cases_per_length": cases, "repeats": repeats, "threads": torch.get_num_threads(),
                     "canvas_length": engine.defaults.canvas_length, "max_steps": engine.defaults.max_steps,
                     "prefill": "cold (reuse_cache=False) for both", "ar_decoding": "greedy, KV-cached, same token budget",
                     "exact_match": "trailing whitespace ignored"},
        "load": {"before": load_before, "after": load_after},
        "targets": TARGETS,
        "target_met": met,
        "lengths": results,
        "forward_ms_by_canvas_width": scaling,
    }
    path = common.write("decode", payload, quick=args.quick)
    torch.set_num_threads(previous_threads)
    for r in results:
        d = r["diffusion"]
        line = f"decode {r['length']:>4} tok: diffusion p50 {d['wall_ms']['p50']} ms, {d['tokens_per_forward_mean']} tok/fwd, exact {d['exact_match']}"
        if "ar" in r:
            line += f" | AR p50 {r['ar']['wall_ms']['p50']} ms, exact {r['ar']['exact_match']} | speedup {r['speedup']}x"
        print(line)
    print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
