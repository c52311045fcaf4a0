"""Tune how many first tokens of a fill the next-token head writes, and store it with the model.

A fill led by the head (`dg_engine.lead`) starts with the encoder's greedy tokens and lets the
decoder fill the rest. How many pay depends on how the two halves of the model were trained, so
it is chosen per model on the held-out holes the sampler is tuned on, by the sampler tuner's rule
(`tune.choose`: exact match first, then edit similarity, then the fewest forward passes), and
stored as `lead_config.json` in the model directory, where `load_engine` reads it. A lead is a
count of tokens or `line`: the head writes the fill's whole first line (at most LINE_TOKENS);
`line/N` takes that line from a beam of N hypotheses (`dg_engine.beam`).

    python -m dg_engine.train.tune_lead --model engine/embedded --cases 400 --leads 0,4,line,line/3 --write
"""

from __future__ import annotations

import collections
import difflib
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

LEADS = ("0", "2", "4", "8", "line")
# The most tokens a `line` lead writes: a line of code of about a hundred characters.
LINE_TOKENS = 32


class Lead(NamedTuple):
    tokens: int
    line: bool
    beam: int = 1


def parse_lead(text: str) -> Lead:
    """`"4"` -> (4, False, 1); `"line"` -> (LINE_TOKENS, True, 1); `"line/3"` -> (LINE_TOKENS, True, 3).
    Raises ValueError on anything else."""
    kind, _, beam = text.strip().partition("/")
    if kind == "line":
        width = int(beam) if beam else 1
        if not 1 <= width <= 16:
            raise ValueError(f"a line lead's beam is from 1 to 16 hypotheses, not {text!r}")
        return Lead(LINE_TOKENS, True, width)
    count = int(text)
    if not 0 <= count <= 64:
        raise ValueError(f"a lead is a count of tokens from 0 to 64, 'line' or 'line/N', not {text!r}")
    return Lead(count, False)


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.strip(), b.strip(), autojunk=False).ratio()


def measure(engine, cases, leads=LEADS, examples: int = 8, heal: bool | None = None) -> dict:
    """Every lead on the same holes: exact match, edit similarity, passes, overall and per kind.
    `heal`: whether the head may finish the prefix's last token (None: the engine's default)."""
    from ..engine import FillRequest

    totals = collections.defaultdict(lambda: {"cases": 0, "exact": 0, "similarity": 0.0, "steps": 0})
    shown, started = [], time.perf_counter()
    for i, case in enumerate(cases):
        fills = {}
        for k in leads:
            lead = parse_lead(k)
            best = engine.fill(FillRequest(case.prefix, case.suffix, seed=i, reuse_cache=False, lead_tokens=lead.tokens,
                                           lead_line=lead.line, lead_beam=lead.beam, heal=heal)).candidates[0]
            fills[k] = best.text
            for key in ((k, "all"), (k, case.kind)):
                t = totals[key]
                t["cases"] += 1
                t["exact"] += best.text.strip() == case.middle.strip()
                t["similarity"] += similarity(best.text, case.middle)
                t["steps"] += best.steps
        if len(shown) < examples:
            shown.append({"middle": case.middle, **{f"lead {k}": f for k, f in fills.items()}})
    rows = [{"lead": k, "lead_tokens": parse_lead(k).tokens, "lead_line": parse_lead(k).line,
             "lead_beam": parse_lead(k).beam, "kind": kind,
             "cases": t["cases"],
             "exact_match": round(t["exact"] / t["cases"], 4),
             "edit_similarity": round(t["similarity"] / t["cases"], 4),
             "mean_steps": round(t["steps"] / t["cases"], 3)}
            for (k, kind), t in totals.items()]
    rows.sort(key=lambda r: (r["kind"] != "all", r["kind"], r["lead_line"], r["lead_tokens"], r["lead_beam"]))
    return {"cases": len(cases), "rows": rows, "examples": shown,
            "seconds": round(time.perf_counter() - started, 1)}


def best_lead(result: dict) -> str:
    """The chosen lead, as `measure` names it (`"4"`, `"line"`)."""
    from .tune import choose

    return choose([r for r in result["rows"] if r["kind"] == "all"])["lead"]


def lead_config(lead: str) -> dict:
    """What LEAD_CONFIG holds for a lead."""
    count, line, beam = parse_lead(lead)
    if not line:
        return {"lead_tokens": count}
    return {"lead_tokens": count, "lead_line": True, **({"lead_beam": beam} if beam > 1 else {})}


def parse_leads(text: str, parser) -> list[str]:
    """The distinct leads of a comma-separated list, counts first; a bad one is a usage error."""
    leads = {k.strip() for k in text.split(",") if k.strip()}
    try:
        if not leads:
            raise ValueError("no lead given")
        return sorted(leads, key=lambda k: (parse_lead(k).line, parse_lead(k).tokens, parse_lead(k).beam))
    except ValueError as exc:
        parser.error(f"--leads: {exc}")


def main(argv: list[str] | None = None) -> int:
    from ..config import LEAD_CONFIG
    from ..loader import resolve_source
    from .tune import fp32_engine, held_out_cases, tuner_arguments

    parser = tuner_arguments(__doc__.splitlines()[0], 400, LEAD_CONFIG)
    parser.add_argument("--leads", default=",".join(LEADS),
                        help="leads to try, comma-separated: counts, 'line' or 'line/N' (a beam of N)")
    args = parser.parse_args(argv)
    leads = parse_leads(args.leads, parser)
    engine = fp32_engine(args.model)
    engine.defaults = replace(engine.defaults, lead_tokens=0, lead_line=False)
    cases = held_out_cases(engine, args.cases, root=Path(args.corpus_root) if args.corpus_root else None)
    result = measure(engine, cases, leads)
    for row in result["rows"]:
        print(json.dumps(row))
    best = best_lead(result)
    print(f"best: {json.dumps(lead_config(best))}")
    if args.report:
        Path(args.report).write_text(json.dumps({**result, "best": best}, indent=2) + "\n")
    if args.write:
        from ..config import tuned_lead_margin, tuned_lead_stop

        path = resolve_source(args.model) / LEAD_CONFIG
        # The stop threshold and the beam's margin were chosen apart (`lead.py`, `beam.py`), and
        # measured with this run's leads; a new lead keeps them (the margin only for a beam).
        config = lead_config(best)
        kept = {"lead_stop": tuned_lead_stop(path.parent)} if tuned_lead_stop(path.parent) < 1.0 else {}
        if config.get("lead_beam", 1) > 1 and tuned_lead_margin(path.parent) > 0:
            kept["lead_margin"] = tuned_lead_margin(path.parent)
        path.write_text(json.dumps({**config, **kept}, indent=2) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
