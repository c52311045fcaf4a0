"""Token healing measured: the same fills with and without the head finishing the prefix's last token.

A cursor after a space or inside a word leaves the prompt ending in a token that whole-file
tokenization seldom puts there (`dg_engine.healing`). This scores the engine's own fills, with the
model's lead settings, on the fixed held-out holes every training piece is scored on, once with
healing and once without, overall and per kind of hole, and counts how many prompts could be
healed at all. Holes that end their line are led by the head either way; a hole that closes inside
its line gets one head token only when healed.

    python -m benchmarks.healing [--cases 400] [--model embedded] [--lead line] [--quick]
"""

from __future__ import annotations

import argparse

from . import common
from .fixtures import model_label, resolve_model


def measure(model: str, cases: int, lead: str | None = None) -> dict:
    from dg_engine.train.tune import fp32_engine, held_out_cases
    from dg_engine.train.tune_lead import measure as measure_leads

    # fp32, as the training pieces are scored, so the numbers compare with pieces.jsonl.
    engine = fp32_engine(model)
    holes = held_out_cases(engine, cases)
    d = engine.defaults
    # Healing is the head's: a model without a lead of its own is measured with the one asked for.
    own = ("line" + (f"/{d.lead_beam}" if d.lead_beam > 1 else "")) if d.lead_line else str(d.lead_tokens)
    lead = lead or own
    fim_middle = engine.format.specials.fim_middle
    healable = sum(engine.healer.point(engine.format.infill_ids(h.prefix, h.suffix), fim_middle) is not None
                   for h in holes)
    runs = {name: measure_leads(engine, holes, (lead,), examples=0, heal=heal)
            for name, heal in (("healed", True), ("unhealed", False))}
    rows = [{**r, "healing": name} for name, run in runs.items() for r in run["rows"]]
    rows.sort(key=lambda r: (r["kind"] != "all", r["kind"], r["healing"]))
    return {"model": model_label(model), "lead": lead, "cases": len(holes), "healable": healable, "rows": rows,
            "seconds": {name: run["seconds"] for name, run in runs.items()}}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="a model directory or 'embedded'")
    p.add_argument("--cases", type=int, default=400)
    p.add_argument("--lead", default=None, help="head tokens or 'line' (default: the model's own lead)")
    p.add_argument("--quick", action="store_true", help="the tiny random model and 4 holes (the pipeline only)")
    args = p.parse_args(argv)
    if args.lead is not None:
        from dg_engine.train.tune_lead import parse_leads

        parse_leads(args.lead, p)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model = resolve_model(args.model, args.quick)
    # The tiny random model has no lead of its own; a quick run leads with the line so healing runs.
    lead = args.lead or ("line" if args.quick else None)
    result, load = common.under_load(lambda: measure(model, 4 if args.quick else args.cases, lead))
    print(f"{result['healable']} of {result['cases']} prompts can be healed; the model's lead: {result['lead']}")
    print("| holes | healing | exact match | edit similarity | forward passes |")
    print("|---|---|---:|---:|---:|")
    for r in result["rows"]:
        print(f"| {r['kind']} ({r['cases']}) | {r['healing']} | {r['exact_match']:.1%} "
              f"| {r['edit_similarity']:.3f} | {r['mean_steps']:.1f} |")
    settings = {"precision": "float32", "holes": "dg_engine.train.tune.held_out_cases, seed 0 (those of pieces.jsonl)",
                "decoder": "the model's own sampler and lead settings, one canvas, seed = the hole's index"}
    path = common.write("healing", {"quick": args.quick, "settings": settings, "load": load, **result},
                        quick=args.quick)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
