"""Fills led by the encoder's next-token head for their first k tokens, the decoder filling the rest.

Block-parallel training gives the encoder a next-token loss on every token, so the shipped model
is also a small causal language model. Its fills go wrong mostly in their first tokens (the
probe in `engine/train/README.md`), where the decoder, starting from all noise, commits several
positions at once and repeats itself (`formatter.formatter.formatterFormatter`). This measures
the engine's own led fills (`dg_engine.lead`, `FillRequest.lead_tokens`) on the fixed held-out
holes every training piece is scored on, overall and per kind of hole, and names the lead that
`python -m dg_engine.train.tune_lead --write` would store with the model.

    python -m benchmarks.lead [--cases 400] [--leads 0,2,4,8,line] [--model embedded] [--quick]
    python -m benchmarks.lead --leads line,line/2,line/3 --name lead_beam   # the line from a beam
"""

from __future__ import annotations

import argparse

from . import common
from .fixtures import model_label, resolve_model


def measure(model: str, cases: int, leads: list[str], seed: int = 0) -> dict:
    from dataclasses import replace

    from dg_engine.train.tune import fp32_engine, held_out_cases
    from dg_engine.train.tune_lead import best_lead, measure as measure_leads

    # fp32, as the training pieces are scored, so the numbers compare with pieces.jsonl.
    engine = fp32_engine(model)
    engine.defaults = replace(engine.defaults, lead_tokens=0, lead_line=False)
    result = measure_leads(engine, held_out_cases(engine, cases, seed=seed), leads)
    return {"model": model_label(model), **result, "best": best_lead(result)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="a model directory or 'embedded'")
    p.add_argument("--cases", type=int, default=400)
    p.add_argument("--leads", default="0,2,4,8,line",
                   help="head tokens before the decoder, comma-separated; 'line': the head writes the first line; "
                        "'line/N': that line from a beam of N (dg_engine.beam)")
    p.add_argument("--seed", type=int, default=0, help="which held-out holes: 0 is the set every piece is scored on")
    p.add_argument("--name", default="lead", help="the result file's name: results/NAME.json")
    p.add_argument("--quick", action="store_true", help="the tiny random model and 4 holes (the pipeline only)")
    args = p.parse_args(argv)
    from dg_engine.train.tune_lead import parse_leads

    leads = parse_leads(args.leads, p)
    model = resolve_model(args.model, args.quick)
    result, load = common.under_load(lambda: measure(model, 4 if args.quick else args.cases, leads, args.seed))
    print("| head tokens | holes | exact match | edit similarity | forward passes |")
    print("|---|---|---:|---:|---:|")
    for r in result["rows"]:
        print(f"| {r['lead']} | {r['kind']} ({r['cases']}) | {r['exact_match']:.1%} "
              f"| {r['edit_similarity']:.3f} | {r['mean_steps']:.1f} |")
    print(f"best lead: {result['best']}")
    settings = {"precision": "float32", "holes": f"dg_engine.train.tune.held_out_cases, seed {args.seed}"
                                                 + (" (those of pieces.jsonl)" if args.seed == 0 else ""),
                "head": "greedy or, for line/N, a beam of N (dg_engine.beam); its tokens in the encoder's cache "
                        "before the canvas (dg_engine.lead)",
                "decoder": "the model's own sampler settings, one canvas, seed = the hole's index"}
    path = common.write(args.name, {"quick": args.quick, "settings": settings, "load": load, **result}, quick=args.quick)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
