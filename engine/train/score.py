"""Score an exported model on a fixed set of held-out holes: the number every training piece ends with.

The long run is cut into pieces of a few hours; each piece ends by exporting the model and scoring
it here on the same held-out holes (`tune.held_out_cases`, seed 0: the rest of a line, a whole
line and random spans cut from the held-out standard-library modules, never trained on), with the
sampler settings stored in the model, and probes how well a fill's first step can start
(`probe.py`). The row appended to `--out` (JSON Lines) joins the score to
the training state (step, tokens seen, hours trained, held-out loss), which is what the README's
quality-by-training-tokens table and curve are drawn from.

Totals of two close models differ by less than their noise, so `--per-case` keeps each hole's
score and `--against` compares with another model's, hole by hole (`paired.py`): the row then
says whether the piece is better than the shipped model, worse, or a tie.

    python -m dg_engine.train.score --model engine/embedded --state engine/train/state \\
        --out benchmarks/results/training/pieces.jsonl
    python -m dg_engine.train.score --model runs/export --cases 400 --per-case runs/holes.json \\
        --against benchmarks/results/training/holes400_shipped.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .paired import fingerprint, paired_comparison, per_case_record, read_per_case, write_per_case
from .probe import first_token_probe
from .resume import read_state
from .tune import held_out_cases, score


def main(argv: list[str] | None = None) -> int:
    from ..config import EngineConfig
    from ..engine import load_engine

    p = argparse.ArgumentParser(prog="python -m dg_engine.train.score", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="embedded")
    p.add_argument("--cases", type=int, default=80)
    p.add_argument("--state", default=None, help="the run's resume state, whose step and tokens go in the row")
    p.add_argument("--val-loss", type=float, default=None, help="the held-out loss the run logged last")
    p.add_argument("--note", default="")
    p.add_argument("--out", default=None, help="append the row to this JSON Lines file")
    p.add_argument("--per-case", default=None, help="write each hole's exact match and similarity here")
    p.add_argument("--against", default=None, help="another model's --per-case file: compare hole by hole")
    args = p.parse_args(argv)
    # Read first: a bad baseline should fail before minutes of scoring, not after.
    try:
        baseline = read_per_case(Path(args.against)) if args.against else None
    except ValueError as e:
        p.error(str(e))
    # fp32, so scores stay comparable across pieces and machines whatever precision is fastest here.
    engine = load_engine(EngineConfig(model=args.model, dtype="float32", quantization="none"))
    cases = held_out_cases(engine, args.cases)
    middles = [case.middle for case in cases]
    if baseline is not None and baseline["holes"] != fingerprint(middles):
        p.error(f"{args.against} was measured on other holes (another --cases, tokenizer or held-out split)")
    d = engine.defaults
    holes: list = []
    result = score(engine, cases, holes, max_steps=d.max_steps, entropy_bound=d.entropy_bound, t_max=d.t_max,
                   stability_threshold=d.stability_threshold)
    mine = per_case_record(middles, [e for e, _ in holes], [r for _, r in holes])
    if args.per_case:
        write_per_case(Path(args.per_case), mine)
    if baseline is not None:
        result["paired"] = {"against": args.against, **paired_comparison(mine, baseline)}
    result.update(first_token_probe(engine.model, cases, engine.format.specials.pad))
    state = read_state(Path(args.state)) if args.state else None
    row = {"date": time.strftime("%Y-%m-%d"), "model": args.model, "note": args.note, "val_loss": args.val_loss,
           "step": state["step"] if state else None, "tokens": state.get("tokens") if state else None,
           "hours": round(state["elapsed_s"] / 3600, 3) if state else None, **result}
    print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
