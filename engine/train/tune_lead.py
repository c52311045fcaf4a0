"""Tune how many first tokens of a fill the next-token head writes, and store it with the model.

A fill led by the head (`dg_engine.lead`) starts with the encoder's greedy tokens and lets the
decoder fill the rest. How many pay depends on how the two halves of the model were trained, so
it is chosen per model on the held-out holes the sampler is tuned on, by the sampler tuner's rule
(`tune.choose`: exact match first, then edit similarity, then the fewest forward passes), and
stored as `lead_config.json` in the model directory, where `load_engine` reads it.

    python -m dg_engine.train.tune_lead --model engine/embedded --cases 400 --write
"""

from __future__ import annotations

import collections
import difflib
import json
import time
from dataclasses import replace
from pathlib import Path

LEADS = (0, 2, 4, 8)


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.strip(), b.strip(), autojunk=False).ratio()


def measure(engine, cases, leads=LEADS, examples: int = 8) -> dict:
    """Every lead on the same holes: exact match, edit similarity, passes, overall and per kind."""
    from ..engine import FillRequest

    totals = collections.defaultdict(lambda: {"cases": 0, "exact": 0, "similarity": 0.0, "steps": 0})
    shown, started = [], time.perf_counter()
    for i, case in enumerate(cases):
        fills = {}
        for k in leads:
            best = engine.fill(FillRequest(case.prefix, case.suffix, seed=i, reuse_cache=False,
                                           lead_tokens=k)).candidates[0]
            fills[k] = best.text
            for key in ((k, "all"), (k, case.kind)):
                t = totals[key]
                t["cases"] += 1
                t["exact"] += best.text.strip() == case.middle.strip()
                t["similarity"] += similarity(best.text, case.middle)
                t["steps"] += best.steps
        if len(shown) < examples:
            shown.append({"middle": case.middle, **{f"lead {k}": f for k, f in fills.items()}})
    rows = [{"lead_tokens": k, "kind": kind, "cases": t["cases"],
             "exact_match": round(t["exact"] / t["cases"], 4),
             "edit_similarity": round(t["similarity"] / t["cases"], 4),
             "mean_steps": round(t["steps"] / t["cases"], 3)}
            for (k, kind), t in totals.items()]
    rows.sort(key=lambda r: (r["kind"] != "all", r["kind"], r["lead_tokens"]))
    return {"cases": len(cases), "rows": rows, "examples": shown,
            "seconds": round(time.perf_counter() - started, 1)}


def best_lead(result: dict) -> int:
    from .tune import choose

    return choose([r for r in result["rows"] if r["kind"] == "all"])["lead_tokens"]


def main(argv: list[str] | None = None) -> int:
    from ..config import LEAD_CONFIG
    from ..loader import resolve_source
    from .tune import fp32_engine, held_out_cases, tuner_arguments

    parser = tuner_arguments(__doc__.splitlines()[0], 400, LEAD_CONFIG)
    parser.add_argument("--leads", default=",".join(map(str, LEADS)), help="head tokens to try, comma-separated")
    args = parser.parse_args(argv)
    leads = sorted({int(k) for k in args.leads.split(",")})
    if any(not 0 <= k <= 64 for k in leads):
        parser.error("--leads are counts of tokens from 0 to 64")
    engine = fp32_engine(args.model)
    engine.defaults = replace(engine.defaults, lead_tokens=0)
    cases = held_out_cases(engine, args.cases, root=Path(args.corpus_root) if args.corpus_root else None)
    result = measure(engine, cases, leads)
    for row in result["rows"]:
        print(json.dumps(row))
    best = best_lead(result)
    print(f"best: lead_tokens = {best}")
    if args.report:
        Path(args.report).write_text(json.dumps({**result, "best": best}, indent=2) + "\n")
    if args.write:
        path = resolve_source(args.model) / LEAD_CONFIG
        path.write_text(json.dumps({"lead_tokens": best}, indent=2) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
