"""Measure one infill's latency for a model size: the number the size was chosen by.

An infill is one encoder prefill of the prompt (~1k tokens) followed by a handful of decoder passes
over the canvas that attend to the cached prompt, feeding each pass's logits back as
self-conditioning. `python -m dg_engine.train.latency --size small --threads 2` prints the median
of a few repetitions, with random weights (latency does not depend on the values).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from .model import build_model, count_parameters


def time_infill(model, context: int, canvas: int, passes: int) -> tuple[float, float]:
    """(prefill ms including the first decoder pass, ms of the remaining decoder passes)."""
    vocab = model.config.text_config.vocab_size
    prompt = torch.randint(8, vocab, (1, context))  # [1, L]
    with torch.inference_mode():
        start = time.perf_counter()
        out = model(input_ids=prompt, decoder_input_ids=torch.randint(0, vocab, (1, canvas)))
        cache, logits = out.past_key_values, out.logits  # logits: [1, C, V]
        mid = time.perf_counter()
        for _ in range(passes - 1):
            logits = model(past_key_values=cache, decoder_input_ids=logits.argmax(-1), self_conditioning_logits=logits).logits
        end = time.perf_counter()
    return (mid - start) * 1000, (end - mid) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="small")
    p.add_argument("--layers", type=int, default=None, help="text layers, if not the size's (a grown model)")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--canvas", type=int, default=32)
    p.add_argument("--passes", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model = build_model(args.size, args.vocab, seed=0, layers=args.layers).eval()
    time_infill(model, args.context, args.canvas, args.passes)  # warm-up
    runs = [time_infill(model, args.context, args.canvas, args.passes) for _ in range(args.repeats)]
    prefill = statistics.median(r[0] for r in runs)
    decode = statistics.median(r[1] for r in runs)
    total = statistics.median(r[0] + r[1] for r in runs)
    print(f"size={args.size} layers={model.config.text_config.num_hidden_layers} params={count_parameters(model):,} threads={args.threads} context={args.context} "
          f"canvas={args.canvas} passes={args.passes}: prefill+1st pass {prefill:.1f} ms, "
          f"{args.passes - 1} more passes {decode:.1f} ms, total {total:.1f} ms (median of {args.repeats})")


if __name__ == "__main__":
    main()
