"""The first tokens of a fill from the encoder's next-token head, the rest from the decoder.

Block-parallel training gives the encoder a next-token loss on every token, so the shipped model
is also a small causal language model. Its fills go wrong mostly in their first tokens (the
probe in `engine/train/README.md`), where the decoder, starting from all noise, commits several
positions at once and repeats itself (`formatter.formatter.formatterFormatter`). This measures,
on the fixed held-out holes every training piece is scored on, fills whose first `k` tokens are
the head's greedy choice and whose rest the decoder fills after them (`k = 0`: the decoder alone;
a large `k`: the head alone). It is a measurement for deciding whether the engine should lead
with the head; the engine does not do it yet.

    python -m benchmarks.lead [--cases 400] [--leads 0,2,4,8,48] [--model embedded] [--quick]
"""

from __future__ import annotations

import argparse
import collections
import difflib

from . import common
from .fixtures import model_label, resolve_model


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.strip(), b.strip(), autojunk=False).ratio()


def led_fill(engine, case, head: list[int], lead: int, seed: int) -> str:
    """The fill with the head's first `lead` tokens (all of them when it stopped sooner)."""
    from dg_engine.engine import FillRequest

    if lead == 0:
        return engine.fill(FillRequest(case.prefix, case.suffix, seed=seed, reuse_cache=False)).candidates[0].text
    text = engine.tokenizer.decode(head[:lead], skip_special_tokens=True, clean_up_tokenization_spaces=False)
    if len(head) < lead:  # the head ended the middle on its own
        return text
    rest = engine.fill(FillRequest(case.prefix + text, case.suffix, seed=seed, reuse_cache=False)).candidates[0].text
    return text + rest


def measure(model: str, cases: int, leads: list[int], head_tokens: int = 48) -> dict:
    from dg_engine.autoregressive import ar_generate
    from dg_engine.config import EngineConfig
    from dg_engine.engine import load_engine
    from dg_engine.train.tune import held_out_cases

    # fp32, as the training pieces are scored, so the numbers compare with pieces.jsonl.
    engine = load_engine(EngineConfig(model=model, dtype="float32", quantization="none"))
    holes = held_out_cases(engine, cases)
    totals = collections.defaultdict(lambda: {"cases": 0, "exact": 0, "similarity": 0.0})
    examples = []
    for i, case in enumerate(holes):
        prompt = engine.format.infill_ids(case.prefix, case.suffix)
        head, _, _ = ar_generate(engine.model, prompt, head_tokens, set(engine.format.stop_ids))
        fills = {k: led_fill(engine, case, head, k, i) for k in leads}
        for k, fill in fills.items():
            for key in (str(k), f"{k}/{case.kind}"):
                t = totals[key]
                t["cases"] += 1
                t["exact"] += fill.strip() == case.middle.strip()
                t["similarity"] += similarity(fill, case.middle)
        if len(examples) < 8:
            examples.append({"middle": case.middle, **{f"lead {k}": f for k, f in fills.items()}})
    rows = []
    for key, t in totals.items():
        lead, _, kind = key.partition("/")
        rows.append({"lead": int(lead), "kind": kind or "all", "cases": t["cases"],
                     "exact_match": round(t["exact"] / t["cases"], 4),
                     "edit_similarity": round(t["similarity"] / t["cases"], 4)})
    rows.sort(key=lambda r: (r["kind"] != "all", r["kind"], r["lead"]))
    return {"model": model_label(model), "cases": cases, "head_tokens": head_tokens, "rows": rows,
            "examples": examples}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="a model directory or 'embedded'")
    p.add_argument("--cases", type=int, default=400)
    p.add_argument("--leads", default="0,2,4,8,48", help="head tokens before the decoder, comma-separated")
    p.add_argument("--quick", action="store_true", help="the tiny random model and 4 holes (the pipeline only)")
    args = p.parse_args(argv)
    leads = sorted({int(k) for k in args.leads.split(",")})
    if any(k < 0 for k in leads):
        p.error("--leads are counts of tokens, 0 or more")
    model = resolve_model(args.model, args.quick)
    result, load = common.under_load(lambda: measure(model, 4 if args.quick else args.cases, leads))
    print("| head tokens | holes | exact match | edit similarity |")
    print("|---|---|---:|---:|")
    for r in result["rows"]:
        print(f"| {r['lead']} | {r['kind']} ({r['cases']}) | {r['exact_match']:.1%} | {r['edit_similarity']:.3f} |")
    settings = {"precision": "float32", "holes": "dg_engine.train.tune.held_out_cases, seed 0 (those of pieces.jsonl)",
                "head": "greedy, through dg_engine.autoregressive.ar_generate",
                "decoder": "the model's own sampler settings, one canvas, seed = the hole's index"}
    path = common.write("lead", {"quick": args.quick, "settings": settings, "load": load, **result}, quick=args.quick)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
