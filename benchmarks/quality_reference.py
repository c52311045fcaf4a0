"""Rerun only the quality benchmark's model-free rows and fold them into `results/quality.json`.

The reference row (the canonical middle sent through the server's post-processing) and the two
trivial baselines need no model, so a change to post-processing can be measured in a minute
without the hours-long model run. This makes those rows on the same cases as the full run (same
seed and counts), runs the HumanEval tests for them, and replaces just those rows in the result
file, recording when and at which commit they were made; the model rows are left as measured.

    python -m benchmarks.quality_reference          # -> results/quality.json, quality.md, charts
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import common
from . import quality
from . import quality_report as report
from .humaneval import SETS, Executor
from .quality_systems import Setup, fill_all

SYSTEMS = ("canonical", "empty", "previous_line")


def rerun(args) -> dict[str, dict]:
    """The model-free systems' scores per set, in the full benchmark's result shape."""
    sets, _ = quality.collect(args)
    fills = fill_all(Setup(None, None, (), args.seed, args.context_budget), sets, jobs=1)
    executor = Executor(args.timeout, args.workers)
    scores: dict[str, dict] = {}
    for name, cases in sets.items():
        runner = executor if name in SETS else None
        scores[name] = {}
        for system in SYSTEMS:
            raw, shown, ms, _ = (list(x) for x in zip(*fills[name][system]))
            scores[name][system] = {"processed": quality.score(cases, shown, runner),
                                    "raw": quality.score(cases, raw, runner), "latency_ms": common.summary(ms)}
            print(f"{name:22s} {system:14s} {quality._line(scores[name][system]['processed'])}", file=sys.stderr)
    return scores


def merge(payload: dict, scores: dict[str, dict], note: str) -> dict:
    """The result file with the model-free rows replaced and the rerun recorded."""
    for name, systems in scores.items():
        if name in payload["sets"]:
            payload["sets"][name]["systems"].update(systems)
    payload["targets"] = [t for t in payload["targets"] if t.get("system") != "canonical"]
    reference = quality.reference_target(payload["sets"])
    if reference:
        payload["targets"].insert(0, reference)
    payload["model_free_rerun"] = {"systems": list(SYSTEMS), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                                   "code": quality._code_version(), "note": note}
    return payload


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.quality_reference", description=__doc__.splitlines()[0])
    p.add_argument("--note", default="", help="recorded with the rerun")
    args = p.parse_args(argv)
    path = common.RESULTS / "quality.json"
    payload = json.loads(path.read_text())
    settings = payload["settings"]
    counts = settings["cases_per_set"]
    heldout = {k.removeprefix("heldout_"): v for k, v in counts.items() if k.startswith("heldout_")}
    full = quality.parse_args([
        "--limit", ",".join(f"{short}={counts[name]}" for short, name in quality.SHORT.items() if name in counts),
        "--heldout", ",".join(f"{short}={heldout[kind]}" for short, kind in
                              (("single", "single_line"), ("multi", "multi_line"), ("span", "random_span"))),
        "--seed", str(settings["seed"]), "--context-budget", str(settings["context_budget_tokens"]),
    ])
    payload = merge(payload, rerun(full), args.note)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    (common.RESULTS / "quality.md").write_text(report.markdown(payload))
    for metric in ("exact_match", "pass_at_1"):
        report.bar_chart(payload, metric, common.RESULTS / f"quality_{metric}.png")
    print(path)


if __name__ == "__main__":
    main()
