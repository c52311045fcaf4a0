"""The measured effect of the diffusion-native features, each against its own "off" switch.

* Syntax-guided re-noising: syntax-valid share and exact match, repair on against off.
* Variable-length holes: exact match and pass@1, several canvas lengths in one batch against one.
* Joint multi-hole fill: share of two-hole cases with every hole right, joint against one at a time.
* Valid-only ghost text (`inline.validOnly`): the share of as-you-type fills still shown, and
  their exact match, edit similarity and syntax-valid share against those of all fills.
* Confidence: how well "confidence below the threshold" predicts a wrong token (precision and
  recall of the flagged tokens against the reference middle).

Everything runs through the server's own pipeline (`dg_lsp.fill.run_fill`, `dg_lsp.joint.run_joint`)
on holes cut from the held-out standard-library modules and on HumanEval-Infilling, measured in one
run on one machine. Results: `benchmarks/results/features.json` and `features.md`.
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import time

from dg_engine import EngineConfig, load_engine
from dg_lsp.documents import Snapshot
from dg_lsp.fill import Fill, FillJob, run_fill
from dg_lsp.joint import run_joint
from dg_lsp.settings import Settings

from . import common
from .fixtures import resolve_model
from .heldout import cut_holes, held_out_files
from .humaneval import Executor, load_cases
from .quality import score

THRESHOLDS = (0.3, 0.5, 0.7)


def settings(**values) -> Settings:
    return Settings().update(values)[0]


def fill_results(engine, cases, mode: str, config: Settings) -> list[Fill]:
    out = []
    for i, case in enumerate(cases):
        snap = Snapshot(f"file:///bench/{case.id}.py", 1, "python", case.text)
        job = FillJob(snap, case.offset, case.offset, mode, config, max_canvases=config.max_canvases, seed=i)
        out.append(run_fill(engine, job, None))
    return out


def best_text(fill: Fill) -> str:
    return fill.texts[0] if fill.texts else ""


def fills(engine, cases, mode: str, config: Settings) -> list[str]:
    return [best_text(r) for r in fill_results(engine, cases, mode, config)]


def valid_only(engine, sets: dict, config: Settings) -> dict:
    """What `inline.validOnly` does to ghost text: the share of fills still shown, and how the
    shown ones score against all of them (the reference middle decides, not the server's check)."""
    out = {}
    for name, cases in sets.items():
        results = fill_results(engine, cases, "inline", config)
        texts = [best_text(r) for r in results]
        kept = [i for i, r in enumerate(results) if not r.trace.get("addsSyntaxErrors")]
        out[name] = {
            "shown": round(len(kept) / len(cases), 4) if cases else 0.0,
            "all": score(cases, texts, None),
            "shown_only": score([cases[i] for i in kept], [texts[i] for i in kept], None),
        }
    return out


def ablation(engine, sets: dict, on: Settings, off: Settings, executor) -> dict:
    out = {}
    for name, cases in sets.items():
        if not cases:
            continue
        runs = {}
        for label, config in (("on", on), ("off", off)):
            started = time.perf_counter()
            runs[label] = score(cases, fills(engine, cases, "fim", config), executor)
            runs[label]["seconds"] = round(time.perf_counter() - started, 1)
        out[name] = runs
    return out


def two_hole_cases(files, count: int, seed: int = 0) -> list[tuple[str, list[tuple[int, int]], list[str]]]:
    """(text with two line bodies removed, the two empty holes, the two removed texts)."""
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        text = rng.choice(files).text
        lines = text.splitlines(keepends=True)
        if len(lines) < 10:
            continue
        i = rng.randrange(len(lines) - 6)
        j = i + rng.randrange(1, 5)
        a, b = lines[i], lines[j]
        if len(a.strip()) < 4 or len(b.strip()) < 4 or a.strip().startswith("#") or b.strip().startswith("#"):
            continue
        starts = [sum(len(l) for l in lines[:k]) for k in (i, j)]
        indents = [len(a) - len(a.lstrip()), len(b) - len(b.lstrip())]
        removed = [a.strip(), b.strip()]
        new_lines = list(lines)
        new_lines[i] = a[: indents[0]] + ("\n" if a.endswith("\n") else "")
        new_lines[j] = b[: indents[1]] + ("\n" if b.endswith("\n") else "")
        shift = len(a.strip())
        holes = [(starts[0] + indents[0],) * 2, (starts[1] + indents[1] - shift,) * 2]
        cases.append(("".join(new_lines), holes, removed))
    return cases


def multi_hole(engine, cases, config: Settings) -> dict:
    joint_ok = single_ok = 0
    for n, (text, holes, removed) in enumerate(cases):
        snap = Snapshot(f"file:///bench/two-{n}.py", 1, "python", text)
        job = FillJob(snap, holes[0][0], holes[1][1], "holes", config, seed=n, holes=tuple(holes))
        edits, _ = run_joint(engine, job, list(holes), None)
        joint_ok += all(e[2].strip() == r for e, r in zip(edits, removed))
        one = [run_fill(engine, FillJob(snap, a, b, "holes", config, seed=n), None) for a, b in holes]
        single_ok += all(f.texts and f.texts[0].strip() == r for f, r in zip(one, removed))
    return {"cases": len(cases), "all_holes_right": {"joint": round(joint_ok / len(cases), 4),
                                                     "one_at_a_time": round(single_ok / len(cases), 4)}}


def confidence(engine, cases) -> dict:
    """Precision/recall of low-confidence tokens as predictors of wrong ones."""
    from dg_engine import FillRequest

    tokens = []  # (confidence, wrong)
    for i, case in enumerate(cases):
        cand = engine.fill(FillRequest(case.text[: case.offset], case.text[case.offset :], seed=i)).candidates[0]
        matcher = difflib.SequenceMatcher(None, cand.text, case.middle, autojunk=False)
        right = set()
        for block in matcher.get_matching_blocks():
            right.update(range(block.a, block.a + block.size))
        for (a, b), p in zip(cand.token_offsets, cand.confidences):
            if b > a and cand.text[a:b].strip():
                tokens.append((p, not all(k in right for k in range(a, b))))
    out = {"tokens": len(tokens), "wrong_share": round(sum(w for _, w in tokens) / max(1, len(tokens)), 4)}
    for t in THRESHOLDS:
        flagged = [w for p, w in tokens if p < t]
        wrong = sum(w for _, w in tokens)
        hit = sum(flagged)
        out[f"threshold_{t}"] = {
            "flagged": len(flagged),
            "precision": round(hit / len(flagged), 4) if flagged else None,
            "recall": round(hit / wrong, 4) if wrong else None,
        }
    return out


def table(results: dict) -> str:
    lines = ["| feature | set | on | off |", "|---|---|---|---|"]
    for feature, metric in (("syntax_repair", "syntax_ok"), ("syntax_repair", "exact_match"),
                            ("variable_length", "exact_match"), ("variable_length", "pass_at_1")):
        for name, runs in results.get(feature, {}).items():
            if metric in runs["on"]:
                lines.append(f"| {feature} ({metric}) | {name} | {runs['on'][metric]:.1%} | {runs['off'][metric]:.1%} |")
    mh = results.get("multi_hole")
    if mh:
        lines.append(f"| joint multi-hole (all holes right) | held-out, 2 holes | {mh['all_holes_right']['joint']:.1%} "
                     f"| {mh['all_holes_right']['one_at_a_time']:.1%} |")
    for name, row in results.get("valid_only", {}).items():
        lines.append(f"| inline.validOnly (edit similarity of the ghost text shown) | {name} "
                     f"| {row['shown_only']['edit_similarity']:.3f} ({row['shown']:.0%} of fills shown) "
                     f"| {row['all']['edit_similarity']:.3f} |")
        lines.append(f"| inline.validOnly (whole file still parses as well, of what is shown) | {name} "
                     f"| {row['shown_only']['syntax_ok']:.1%} | {row['all']['syntax_ok']:.1%} |")
    conf = results.get("confidence", {})
    for t in THRESHOLDS:
        row = conf.get(f"threshold_{t}")
        if row and row["precision"] is not None:
            lines.append(f"| low confidence < {t} predicts a wrong token | held-out | precision {row['precision']:.1%} "
                         f"| recall {row['recall']:.1%} |")
    return "\n".join(lines) + "\n"


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.features", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--model", default=None)
    parser.add_argument("--cases", type=int, default=40, help="held-out holes per kind")
    parser.add_argument("--humaneval", type=int, default=30, help="HumanEval cases per set")
    parser.add_argument("--only", default="", help="comma-separated subset; the rest is kept from the last full run")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None):
    args = parse_args(argv)
    count, he = (2, 1) if args.quick else (args.cases, args.humaneval)
    model = resolve_model(args.model, args.quick)
    engine = load_engine(EngineConfig(model=model))
    files = held_out_files()
    held = cut_holes(files, {"single_line": count, "multi_line": count, "random_span": count}, seed=1)
    by_kind = {f"heldout_{k}": [c for c in held if c.set == f"heldout_{k}"] for k in ("single_line", "multi_line", "random_span")}
    try:
        humaneval = {f"he_{n}": load_cases(f"he_{n}", he) for n in ("single_line", "multi_line")}
        executor = Executor()
    except FileNotFoundError:
        humaneval, executor = {}, None
    base = dict(maxSteps=3) if args.quick else {}
    started = time.perf_counter()
    measures = {
        "syntax_repair": lambda: ablation(engine, by_kind, settings(syntaxRepair=True, variableLength=False, **base),
                                          settings(syntaxRepair=False, variableLength=False, **base), None),
        "variable_length": lambda: ablation(engine, {**by_kind, **humaneval},
                                            settings(variableLength=True, syntaxRepair=False, **base),
                                            settings(variableLength=False, syntaxRepair=False, **base), executor),
        "valid_only": lambda: valid_only(engine, by_kind, settings(**base)),
        "multi_hole": lambda: multi_hole(engine, two_hole_cases(files, count), settings(**base)),
        "confidence": lambda: confidence(engine, held),
    }
    wanted = [n for n in args.only.split(",") if n] or list(measures)
    previous = common.RESULTS / ("features.quick.json" if args.quick else "features.json")
    results = {k: v for k, v in json.loads(previous.read_text()).items() if k in measures} if (
        args.only and previous.exists()) else {}
    results.update({name: measures[name]() for name in wanted})
    payload = {"model": model, "quick": args.quick, "settings": {"heldout_per_kind": count, "humaneval_per_set": he},
               "seconds": round(time.perf_counter() - started, 1), **results}
    path = common.write("features", payload, quick=args.quick)
    if not args.quick:
        (common.RESULTS / "features.md").write_text(table(results))
    print(table(results))
    return path


if __name__ == "__main__":
    main()
