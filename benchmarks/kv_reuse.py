"""Cold against incremental prefill: what the encoder-cache reuse saves while the user types.

The suffix-first FIM prompt keeps everything before the cursor's last tokens identical from one
keystroke to the next, so `PrefixCache.prefill` should only encode the few tokens after the edit.
This benchmark times `PrefixCache.prefill` on held-out code at 512, 2k and 8k prompt tokens:
cold (`reuse=False`, the whole prompt) and incremental (the same prompt with a few characters
typed at the end of the prefix, reusing the cache of the prompt before the edit), and reports
the speedup. It also checks that reuse changes nothing: the same fill with and without reuse
(same seed) must give the same tokens, and the reused cache must equal a cold one.

    python -m benchmarks.kv_reuse [--quick] [--model embedded] [--contexts 512,2048,8000]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from . import common
from .fixtures import long_text, model_label, resolve_model, use_threads

TARGETS = {"context": 2048, "speedup": 5.0}
TYPED = "    resu"  # what the user types at the end of the prefix (a few tokens)


def prompts(engine, text: str, context: int) -> tuple[str, str, list[int], list[int]]:
    """(prefix, suffix, cold ids, ids after typing) with about `context` prompt tokens, 3:1 prefix:suffix."""
    ids = engine.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = ids["offset_mapping"]
    cut = int(context * 0.75)
    if len(offsets) < context:
        raise ValueError(f"held-out text has only {len(offsets)} tokens, fewer than {context}")
    split = offsets[cut][0]
    end = offsets[context - 1][1]
    prefix, suffix = text[:split], text[split:end]
    prefix = prefix[: prefix.rfind("\n") + 1]  # the cursor at the start of a line
    cold = engine.format.infill_ids(prefix, suffix)
    typed = engine.format.infill_ids(prefix + TYPED, suffix)
    return prefix, suffix, cold, typed


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def measure(engine, text: str, context: int, cold_reps: int, warm_reps: int) -> dict:
    cache = engine.prefix_cache
    prefix, suffix, cold_ids, typed_ids = prompts(engine, text, context)
    cache.prefill(cold_ids, reuse=False)  # warm-up
    cold = [timed(lambda: cache.prefill(cold_ids, reuse=False)) for _ in range(cold_reps)]
    incremental, encoded = [], 0
    for _ in range(warm_reps):
        cache.prefill(cold_ids, reuse=True)  # back to the prompt before the keystrokes (crop + few tokens)
        incremental.append(timed(lambda: cache.prefill(typed_ids, reuse=True)))
        encoded = len(typed_ids) - cache_reused(cold_ids, typed_ids)
    reused_keys = [layer.keys.clone() for layer in cache.cache.layers]
    cache.prefill(typed_ids, reuse=False)
    kv_diff = max(float((a - layer.keys).abs().max()) for a, layer in zip(reused_keys, cache.cache.layers))
    same = same_fill(engine, prefix, suffix)
    out = {
        "context_tokens": len(cold_ids),
        "typed_tokens_encoded": encoded,
        "cold_ms": common.summary(cold),
        "incremental_ms": common.summary(incremental),
        "speedup": round(common.percentile(cold, 50) / max(1e-6, common.percentile(incremental, 50)), 2),
        "kv_max_abs_diff": kv_diff,
        "fill_matches_without_reuse": same,
    }
    return out


def cache_reused(old: list[int], new: list[int]) -> int:
    from dg_engine.kvcache import common_prefix_length

    return common_prefix_length(old, new)


def same_fill(engine, prefix: str, suffix: str) -> bool:
    """The fill after a keystroke, with the reused cache and cold, gives the same tokens."""
    from dg_engine import FillRequest

    engine.fill(FillRequest(prefix, suffix, seed=0))  # the cache now holds the prompt before typing
    reused = engine.fill(FillRequest(prefix + TYPED, suffix, seed=0))
    cold = engine.fill(FillRequest(prefix + TYPED, suffix, seed=0, reuse_cache=False))
    assert reused.reused_tokens > 0 and cold.reused_tokens == 0
    return [c.token_ids for c in reused.candidates] == [c.token_ids for c in cold.candidates]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.kv_reuse", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny model, small contexts, few repetitions")
    p.add_argument("--model", default=None)
    p.add_argument("--contexts", default=None, help="prompt tokens (default 512,2048,8000; the model allows 8192 positions)")
    p.add_argument("--repeats", type=int, default=0, help="repetitions per measurement (0: by context)")
    p.add_argument("--threads", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    from dg_engine import EngineConfig, load_engine

    args = parse_args(argv)
    previous_threads = use_threads(args.threads, args.quick)
    model = resolve_model(args.model, args.quick)
    contexts = [int(x) for x in (args.contexts or ("256,512" if args.quick else "512,2048,8000")).split(",")]
    engine = load_engine(EngineConfig(model=model))
    text = long_text(engine.tokenizer, max(contexts))
    load_before = os.getloadavg()
    results = []
    for context in contexts:
        if args.quick:
            reps = (2, 3)
        elif args.repeats:
            reps = (args.repeats, args.repeats)
        else:
            reps = (20, 30) if context <= 1024 else (10, 30) if context <= 4096 else (5, 20)
        results.append(measure(engine, text, context, *reps))
    load_after = os.getloadavg()
    # int8 and bf16 (what `auto` may pick) round a chunked prefill differently from a whole one, so
    # the cache logic itself is checked at fp32, where reuse must change nothing.
    exact = load_engine(EngineConfig(model=model, dtype="float32", quantization="none"))
    prefix, suffix, _, _ = prompts(exact, text, contexts[0])
    fp32_same = same_fill(exact, prefix, suffix)
    at = next((r for r in results if abs(r["context_tokens"] - TARGETS["context"]) <= 0.1 * TARGETS["context"]), None)
    payload = {
        "model": model_label(model),
        "quick": args.quick,
        "settings": {"contexts": contexts, "typed": TYPED, "layout": "suffix-first FIM; the edit is at the end of the prefix",
                     "threads": torch.get_num_threads(), "chunk_size": engine.prefix_cache.chunk_size,
                     "timed": "PrefixCache.prefill (encoder forward into the KV cache)"},
        "load": {"before": load_before, "after": load_after},
        "targets": TARGETS,
        "target_met": None if at is None else at["speedup"] >= TARGETS["speedup"],
        "contexts": results,
        "precision": engine.info().get("precision", ""),
        "fill_matches_without_reuse_fp32": fp32_same,
    }
    path = common.write("kv_reuse", payload, quick=args.quick)
    torch.set_num_threads(previous_threads)
    for r in results:
        print(f"kv_reuse {r['context_tokens']:>5} tok: cold p50 {r['cold_ms']['p50']} ms, incremental p50 "
              f"{r['incremental_ms']['p50']} ms ({r['typed_tokens_encoded']} tokens), speedup {r['speedup']}x, "
              f"fill matches {r['fill_matches_without_reuse']}, kv diff {r['kv_max_abs_diff']:.2e}")
    print(f"kv_reuse at fp32: fill matches {fp32_same}; default precision {payload['precision']}")
    print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
