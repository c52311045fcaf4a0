"""Next-edit suggestions on held-out edit traces: how often one is shown, right, and how fast.

Traces are made from the held-out standard-library modules (never trained on) by the generators
the training uses (`dg_engine.train.traces`): a fixed number per kind, from fixed seeds. Each case
replays the user's edit into the server's `EditHistory`, runs `dg_lsp.next_edit.suggest` exactly
as the server does, and judges what the user would be shown:

* shown: the share of cases with a suggestion (after the confidence gate);
* right: every line the suggestion changes is changed as the edit implies, and it changes one;
* precision: right among shown (a wrong suggestion costs the user attention);
* latency: the wall time of `suggest` (the model's windows) on this machine; the server's pause
  (`nextEdit.debounceMs`, 300 ms by default) comes before it when the server starts the run;
* rules alone: the same judgement of what `dg_lsp.implied` proposes before the model sees it, so
  that the model's part (it only judges those proposals) shows on its own.

The traces are of the four shapes the proposals know, so for the edits of a real session, where
many edits imply nothing and some imply what no rule reads, these shares are an upper bound.

    python -m benchmarks.next_edit [--model DIR] [--per-kind 25] [--quick]
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from dg_engine import NeverCancelled
from dg_engine.nextedit import line_hunks
from dg_engine.train.augment import name_pool
from dg_engine.train.traces import KINDS, Trace, make_trace
from dg_lsp.documents import Snapshot
from dg_lsp.edit_history import EditHistory
from dg_lsp.edits import apply_edits
from dg_lsp.implied import implied_edits
from dg_lsp.next_edit import NextEditJob, suggest
from dg_lsp.settings import Settings

from . import common
from .fixtures import load_model_for, model_label
from .heldout import held_out_files


def traces(per_kind: int, seed: int = 0) -> list[Trace]:
    """`per_kind` traces of each kind from the held-out modules, the same ones every run."""
    files = [f.text for f in held_out_files()]
    pool = name_pool(files, min_count=2)
    rng = random.Random(seed)
    out = []
    for kind in KINDS:
        found, tries = [], 0
        while len(found) < per_kind and tries < per_kind * 200:
            tries += 1
            trace = make_trace(rng.choice(files), kind, rng, pool)
            if trace is not None and line_hunks(trace.current, trace.after):
                found.append(trace)
        out += found
    return out


def replay(trace: Trace) -> tuple[EditHistory, int]:
    """The history after the user's edit, sent as one change; and the cursor, at its end."""
    before, current = trace.before, trace.current
    p = 0
    while p < min(len(before), len(current)) and before[p] == current[p]:
        p += 1
    s = 0
    while s < min(len(before), len(current)) - p and before[-1 - s] == current[-1 - s]:
        s += 1
    history = EditHistory()
    history.open("file:///bench/case.py", before)
    history.changed("file:///bench/case.py", current, [(p, len(before) - s, len(current) - s - p)])
    return history, len(current) - s


def _changes(old: str, new: str) -> set[tuple[int, tuple, tuple]]:
    """Line changes as (line, before, after), a replaced run split line by line."""
    out = set()
    for h in line_hunks(old, new):
        if len(h.before) == len(h.after):
            out |= {(h.line + k, (b,), (a,)) for k, (b, a) in enumerate(zip(h.before, h.after))}
        else:
            out.add((h.line, h.before, h.after))
    return out


def judge(trace: Trace, edits) -> bool:
    """Whether edits (start, end, text, ...) are right: each line they change, changed as implied."""
    if not edits:
        return False
    made = _changes(trace.current, apply_edits(trace.current, [e[:3] for e in edits]))
    return bool(made) and made <= _changes(trace.current, trace.after)


def run(engine, cases: list[Trace], settings: Settings) -> dict:
    per_kind: dict[str, dict] = {}
    latencies = []
    for i, trace in enumerate(cases):
        history, offset = replay(trace)
        uri = "file:///bench/case.py"
        job = NextEditJob(Snapshot(uri, 2, "python", trace.current), offset, tuple(history.recent(uri)),
                          history.undone(uri), settings)
        started = time.perf_counter()
        suggestion = suggest(engine, job, NeverCancelled())
        latencies.append((time.perf_counter() - started) * 1000)
        rules = implied_edits(trace.current, job.hunks[-1])
        row = per_kind.setdefault(trace.kind, {"cases": 0, "shown": 0, "right": 0, "rules_proposed": 0, "rules_right": 0})
        row["cases"] += 1
        row["shown"] += suggestion is not None
        row["right"] += judge(trace, suggestion.edits if suggestion is not None else [])
        row["rules_proposed"] += bool(rules)
        row["rules_right"] += judge(trace, rules)
    table = {}
    for kind, row in per_kind.items():
        table[kind] = {**row, "shown_share": round(row["shown"] / row["cases"], 3),
                       "right_share": round(row["right"] / row["cases"], 3),
                       "precision": round(row["right"] / row["shown"], 3) if row["shown"] else None}
    shown = sum(r["shown"] for r in per_kind.values())
    right = sum(r["right"] for r in per_kind.values())
    return {"kinds": table, "cases": len(cases), "shown_share": round(shown / max(1, len(cases)), 3),
            "right_share": round(right / max(1, len(cases)), 3),
            "precision": round(right / shown, 3) if shown else None, "latency_ms": common.summary(latencies)}


def markdown(result: dict) -> str:
    lines = ["| kind | cases | shown | right | precision | rules alone: proposed | right |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for kind, r in result["kinds"].items():
        precision = "-" if r["precision"] is None else f"{r['precision']:.0%}"
        lines.append(f"| {kind} | {r['cases']} | {r['shown_share']:.0%} | {r['right_share']:.0%} | {precision} | "
                     f"{r['rules_proposed'] / r['cases']:.0%} | {r['rules_right'] / r['cases']:.0%} |")
    lat = result["latency_ms"]
    lines.append(f"\nlatency of a suggestion: p50 {lat['p50']:.0f} ms, p95 {lat['p95']:.0f} ms")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None)
    p.add_argument("--per-kind", type=int, default=25)
    p.add_argument("--min-confidence", type=float, default=Settings.next_edit_min_confidence)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="the tiny random model, 2 cases per kind")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    engine, model = load_model_for(args.model, args.quick, args.threads)
    settings = Settings().update({"nextEdit": {"minConfidence": args.min_confidence}})[0]
    cases = traces(2 if args.quick else args.per_kind)
    result, load = common.under_load(lambda: run(engine, cases, settings))
    payload = {"model": model_label(model), "quick": args.quick, "load": load,
               "settings": {"min_confidence": args.min_confidence, "per_kind": 2 if args.quick else args.per_kind,
                            "threads": args.threads}, **result}
    path = common.write("next_edit", payload, quick=args.quick)
    print(markdown(result))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
