"""Fill quality: how often the embedded model's fills are right, next to an AR model and baselines.

The speed benchmarks say how fast a fill arrives; this one says whether it is worth having. It
fills holes from HumanEval-Infilling (exact match and pass@1 by running the tests) and holes cut
from the held-out standard-library modules (exact match, edit similarity), and for every fill
checks whether the file gained tree-sitter syntax errors. Fills go through the server's own
pipeline (`dg_lsp.fill.context_for` -> `Engine.fill` -> `syntax.postprocess` -> `syntax.rank`),
and the raw model text is scored too, so the effect of post-processing is visible.

Systems: the embedded diffusion model with n=1 and n=4 candidates, the autoregressive baseline
(same backbone, same FIM prompt, greedy), two trivial baselines (empty fill, previous line
repeated) and the canonical middle itself (a check of the executor and of what post-processing
does to a correct answer).

    python -m benchmarks.quality                        # full run -> results/quality.{json,md,png}
    python -m benchmarks.quality --quick --model DIR    # a few cases, results/quality.quick.json
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import sys
import time
from pathlib import Path

from . import common
from . import quality_report as report
from .fixtures import ar_model_dir
from .heldout import KINDS, cut_holes, held_out_files
from .humaneval import REPO, SETS, Case, Executor, data_dir, load_cases
from .quality_systems import Setup, engine_for, fill_all, max_canvases

FULL_LIMITS = {"single": 150, "multi": 100, "span": 100}
QUICK_LIMITS = {"single": 3, "multi": 3, "span": 3}
SHORT = {"single": "he_single_line", "multi": "he_multi_line", "span": "he_random_span"}
HELDOUT_SHARES = {"single_line": 0.4, "multi_line": 0.3, "random_span": 0.3}
# The bar "An embedded model that fills code a user would keep" sets, after post-processing.
TARGETS = [  # (what, set, metric, threshold)
    ("held-out single-line exact match", "heldout_single_line", "exact_match", 0.20),
    ("held-out random-span exact match", "heldout_random_span", "exact_match", 0.15),
    ("held-out multi-line edit similarity", "heldout_multi_line", "edit_similarity", 0.5),
    ("HumanEval multi-line edit similarity", "he_multi_line", "edit_similarity", 0.5),
    ("HumanEval single-line pass@1", "he_single_line", "pass_at_1", 0.10),
    ("fills adding no syntax error (all sets)", "*", "syntax_ok", 0.80),
]
# And on every set, a higher edit similarity than repeating the previous line.
BASELINE = "previous_line"
REFERENCE_THRESHOLD = 0.99


# Metrics ------------------------------------------------------------------------------------


def normalize(text: str) -> str:
    """Trailing whitespace of every line and trailing blank lines removed; indentation kept."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n")).rstrip("\n")


def exact_match(fill: str, middle: str) -> bool:
    return normalize(fill) == normalize(middle)


def levenshtein(a: str, b: str) -> int:
    """Character edit distance (insert, delete, substitute), one row of the table at a time."""
    if len(a) < len(b):
        a, b = b, a
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        diagonal, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (ca != cb))
    return row[-1]


def edit_similarity(fill: str, middle: str) -> float:
    """1 - Levenshtein / max length, on normalized texts; 1.0 when both are empty."""
    a, b = normalize(fill), normalize(middle)
    return 1.0 if not a and not b else 1 - levenshtein(a, b) / max(len(a), len(b))


@functools.lru_cache(maxsize=4096)
def syntax_errors(text: str) -> int:
    """ERROR and MISSING nodes in tree-sitter's Python parse of the text (cached: systems agree often)."""
    from dg_lsp.syntax import DocumentTree, language_for

    return len(DocumentTree(text, language_for("python", None)).error_ranges())


# Scoring --------------------------------------------------------------------------------------


def score(cases: list[Case], fills: list[str], executor: Executor | None, offered: list[list[str]] | None = None) -> dict:
    """Exact match, edit similarity, no-new-syntax-error share and (with tests) pass@1.

    With `offered` (every text the server offers per case, best first) and more than one offered
    somewhere: how often any of them is exact, or passes, the share a user cycling through the
    editor's suggestions would find."""
    originals = [syntax_errors(c.original) for c in cases]
    exact = [exact_match(f, c.middle) for f, c in zip(fills, cases)]
    similar = [edit_similarity(f, c.middle) for f, c in zip(fills, cases)]
    valid = [syntax_errors(c.filled(f)) <= o for f, c, o in zip(fills, cases, originals)]
    out = {
        "exact_match": _mean(exact),
        "edit_similarity": _mean(similar),
        "syntax_ok": _mean(valid),
        "counts": {"cases": len(cases), "exact": sum(exact), "syntax_ok": sum(valid)},
    }
    kinds = sorted({c.kind for c in cases})
    if len(kinds) > 1:
        out["exact_match_by_kind"] = {k: _mean([e for e, c in zip(exact, cases) if c.kind == k]) for k in kinds}
    if executor is not None and all(c.test is not None for c in cases):
        outcomes = executor.run_many([c.filled(f) + "\n" + c.test for f, c in zip(fills, cases)])
        out["pass_at_1"] = _mean([o.passed for o in outcomes])
        for status in ("passed", "failed", "timeout"):
            out["counts"][status] = sum(o.status == status for o in outcomes)
    if offered is not None and any(len(texts) > 1 for texts in offered):
        out["offered_per_case"] = _mean(len(texts) for texts in offered)
        out["exact_in_offered"] = _mean(any(exact_match(t, c.middle) for t in texts) for texts, c in zip(offered, cases))
        if "pass_at_1" in out:
            flat = [(i, c.filled(t) + "\n" + c.test) for i, (texts, c) in enumerate(zip(offered, cases)) for t in texts]
            passed = {i for (i, _), o in zip(flat, executor.run_many([p for _, p in flat])) if o.passed}
            out["pass_in_offered"] = _mean(i in passed for i in range(len(cases)))
    return out


def _mean(values) -> float:
    values = list(values)
    return round(sum(values) / len(values), 4) if values else 0.0


# Orchestration --------------------------------------------------------------------------------


def parse_counts(value: str | None, names, default: dict) -> dict:
    """"150" (every name) or "single=150,multi=100"; unknown names are an error."""
    if not value:
        return dict(default)
    if "=" not in value:
        return {k: int(value) for k in names}
    counts = dict(default)
    for part in value.split(","):
        key, _, number = part.partition("=")
        if key.strip() not in names:
            raise SystemExit(f"unknown set {key!r}; choose from {', '.join(names)}")
        counts[key.strip()] = int(number)
    return counts


def heldout_counts(value: str | None, quick: bool) -> dict:
    short = {"single": "single_line", "multi": "multi_line", "span": "random_span"}
    if value and "=" in value:
        return {short[k]: v for k, v in parse_counts(value, short, {k: 0 for k in short}).items()}
    if not value and quick:
        return {k: 1 for k in HELDOUT_SHARES}
    total = int(value) if value else 200
    counts = {k: int(total * share) for k, share in HELDOUT_SHARES.items()}
    counts["single_line"] += total - sum(counts.values())
    return counts


def load(model: str | None, label: str, problems: dict) -> dict | None:
    """Provenance of a model (path, size, weights hash and date), or None with the reason recorded."""
    if model is None:
        return None
    try:
        engine = engine_for(model)
    except Exception as exc:  # a missing or broken model skips its systems, it does not end the run
        problems[label] = f"{type(exc).__name__}: {exc}"
        return None
    from dg_engine.loader import resolve_source

    weights = resolve_source(model) / "model.safetensors"
    info = {**engine.info(), "path": str(resolve_source(model))}
    info["weights_sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()[:16]
    info["weights_mtime"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(weights.stat().st_mtime))
    # The sampler defaults live in generation_config.json and may be re-tuned after training.
    info["sampling"] = dataclasses.asdict(engine.defaults)
    generation = resolve_source(model) / "generation_config.json"
    if generation.is_file():
        info["generation_config_mtime"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(generation.stat().st_mtime))
    return info


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.quality", description=__doc__.splitlines()[0])
    default_ar = ar_model_dir()
    p.add_argument("--quick", action="store_true", help="3 cases per HumanEval set, 3 held-out holes")
    p.add_argument("--model", default="embedded", help="diffusion model: 'embedded' or a directory")
    p.add_argument("--ar-model", default=str(default_ar) if default_ar else None,
                   help="AR baseline directory ('none' to skip; default runs/ar/model, else benchmarks/baselines/ar)")
    p.add_argument("--limit", help="HumanEval cases per set: N, or single=N,multi=N,span=N")
    p.add_argument("--heldout", help="held-out holes: a total, or single=N,multi=N,span=N")
    p.add_argument("--n", default="1,4", help="candidate counts for the embedded model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--context-budget", type=int, default=2048, help="tokens of context (server default)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds per test program")
    p.add_argument("--workers", type=int, default=2, help="test programs run in parallel")
    p.add_argument("--threads", type=int, default=0, help="torch threads per process (0: torch's default)")
    p.add_argument("--jobs", type=int, default=None,
                   help="processes making fills, each loading the models (default: 1 quick, else up to 4 cores)")
    p.add_argument("--note", default="", help="recorded in the JSON (e.g. which checkpoint)")
    p.add_argument("--out-dir", help="write results here instead of benchmarks/results")
    return p.parse_args(argv)


def collect(args) -> tuple[dict[str, list[Case]], dict]:
    """The cases of every set, and the reason for each set that was skipped."""
    sets, skipped = {}, {}
    limits = parse_counts(args.limit, SHORT, QUICK_LIMITS if args.quick else FULL_LIMITS)
    if data_dir() is None:
        for name in SETS:
            skipped[name] = "HumanEval-Infilling data not found at ../shared/data or /work/shared/data"
    else:
        for short, name in SHORT.items():
            sets[name] = load_cases(name, limits[short], args.seed)
    counts = heldout_counts(args.heldout, args.quick)
    held = cut_holes(held_out_files(), counts, args.seed)
    for kind in KINDS:
        sets[f"heldout_{kind}"] = [c for c in held if c.set == f"heldout_{kind}"]
    return {k: v for k, v in sets.items() if v}, skipped


def evaluate(args) -> dict:
    import os

    import torch

    if args.jobs is None:
        args.jobs = 1 if args.quick else max(1, min(4, os.cpu_count() or 1))
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    problems: dict[str, str] = {}
    sets, skipped = collect(args)
    embedded_info = load(args.model, "embedded", problems)
    ar_model = None if (args.ar_model or "none") == "none" else args.ar_model
    if ar_model is None:
        problems["ar"] = ("skipped with --ar-model none" if args.ar_model == "none"
                          else "no AR model directory (neither runs/ar/model nor benchmarks/baselines/ar, and no --ar-model)")
    ar_info = load(ar_model, "ar", problems)
    setup = Setup(args.model if embedded_info else None, ar_model if ar_info else None,
                  tuple(int(x) for x in args.n.split(",") if x.strip()), args.seed, args.context_budget, args.threads)
    fills = fill_all(setup, sets, args.jobs)
    filled_s = time.perf_counter() - started
    executor = Executor(args.timeout, args.workers)
    results = {}
    for name, cases in sets.items():
        test_runner = executor if name in SETS else None
        results[name] = {"cases": len(cases), "max_canvases": max_canvases(name), "systems": {}}
        for system, made in fills[name].items():
            raw, shown, ms, offered = (list(x) for x in zip(*made))
            results[name]["systems"][system] = {
                "processed": score(cases, shown, test_runner, offered),
                "raw": score(cases, raw, test_runner),
                "latency_ms": common.summary(ms),
            }
            print(f"{name:22s} {system:14s} {_line(results[name]['systems'][system]['processed'])}", file=sys.stderr)
    return {
        "quick": args.quick,
        "note": args.note,
        "models": {"embedded": embedded_info, "ar": ar_info},
        "problems": problems,
        "settings": _settings(args, sets, setup),
        "skipped_sets": skipped,
        "sets": results,
        "targets": targets(results),
        "training": report.training_summary(REPO / "runs"),
        "code": _code_version(),
        "timing_s": {"total": round(time.perf_counter() - started, 1), "fills": round(filled_s, 1),
                     "scoring_and_tests": round(time.perf_counter() - started - filled_s, 1)},
    }


def _code_version() -> dict:
    """The commit measured, and the files that differed from it (others work in the same tree)."""
    import subprocess

    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return ""

    changed = [line[3:] for line in git("status", "--porcelain", "--untracked-files=no").splitlines()]
    return {"commit": git("rev-parse", "HEAD").strip() or None, "modified_files": changed[:50]}


def _line(m: dict) -> str:
    extra = f" pass@1 {m['pass_at_1']:.3f}" if "pass_at_1" in m else ""
    return f"EM {m['exact_match']:.3f} ES {m['edit_similarity']:.3f} syntax {m['syntax_ok']:.3f}{extra}"


def _settings(args, sets, setup: Setup) -> dict:
    embedded = engine_for(setup.model) if setup.model else None
    return {
        "cases_per_set": {k: len(v) for k, v in sets.items()},
        "humaneval_selection": f"seeded sample (seed {args.seed}) spread over each file, in file order",
        "heldout_holes": f"cut by benchmarks/heldout.py with seed {args.seed} from HELD_OUT modules only",
        "n": args.n,
        "seed": args.seed,
        "context_budget_tokens": args.context_budget,
        "canvas_length": embedded.defaults.canvas_length if embedded else None,
        "max_steps": embedded.defaults.max_steps if embedded else None,
        "max_canvases": "1 for single-line sets (inline), 4 for the others (code actions)",
        "ar_max_new_tokens": "canvas_length x max_canvases of the set",
        "test_timeout_s": args.timeout,
        "jobs": args.jobs,
        "threads": args.threads,
        "reported": "processed = the server pipeline (context_for, postprocess, rank, first non-blank); "
        "raw = the engine's first candidate as the model wrote it",
        "exact_match": "equal after removing trailing whitespace per line and trailing blank lines",
        "edit_similarity": "1 - Levenshtein(characters) / max length, on the same normalized texts",
        "syntax_ok": "the filled file has no more tree-sitter ERROR/MISSING nodes than the original file",
        "pass_at_1": "prefix + fill + suffix + test + check(entry_point) exits 0 in `python -I`, no sockets, "
        "2 GiB memory cap, timeouts count as failures",
    }


def reference_target(results: dict) -> dict | None:
    """Post-processing must leave a correct fill alone: the canonical middle's processed exact
    match on the set where it is lowest."""
    found = {k: r["systems"]["canonical"]["processed"]["exact_match"] for k, r in results.items()
             if "canonical" in r.get("systems", {})}
    if not found:
        return None
    lowest = min(found, key=found.get)
    return {"target": f"reference middle unchanged by post-processing (lowest set: {lowest})", "system": "canonical",
            "variant": "processed", "value": found[lowest], "threshold": REFERENCE_THRESHOLD,
            "met": found[lowest] >= REFERENCE_THRESHOLD}


def targets(results: dict) -> list[dict]:
    """Each target for the embedded model, n=1 and n=4, on the server's output and on the raw text,
    and the reference check of post-processing."""
    reference = reference_target(results)
    out = [reference] if reference else []
    for what, name, metric, threshold in TARGETS:
        for system in ("embedded_n1", "embedded_n4"):
            for variant in ("processed", "raw"):
                found = [r["systems"][system][variant] for k, r in results.items()
                         if (name == "*" or k == name) and system in r["systems"]]
                if not found or any(metric not in f for f in found):
                    continue
                total = sum(f["counts"]["cases"] for f in found)
                value = round(sum(f[metric] * f["counts"]["cases"] for f in found) / total, 4)
                out.append({"target": what, "system": system, "variant": variant, "value": value,
                            "threshold": threshold, "met": value >= threshold})
    for name, r in results.items():
        base = r.get("systems", {}).get(BASELINE, {}).get("processed")
        for system in ("embedded_n1", "embedded_n4"):
            mine = r.get("systems", {}).get(system, {}).get("processed")
            if base is None or mine is None:
                continue
            value, threshold = round(mine["edit_similarity"], 4), round(base["edit_similarity"], 4)
            out.append({"target": f"{name} edit similarity above the previous line's", "system": system,
                        "variant": "processed", "value": value, "threshold": threshold,
                        "bar": f"> {threshold} ({BASELINE})", "met": value > threshold})
    return out


def main(argv: list[str] | None = None) -> Path:
    args = parse_args(argv)
    payload = evaluate(args)
    if args.out_dir:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = out / ("quality.quick.json" if args.quick else "quality.json")
        path.write_text(json.dumps({"benchmark": "quality", "machine": common.machine(), **payload}, indent=2) + "\n")
    else:
        out = common.RESULTS
        path = common.write("quality", payload, quick=args.quick)
    if args.out_dir or not args.quick:
        report.write_all(json.loads(path.read_text()), out, REPO / "runs", quick=args.quick)
    print(path)
    return path


if __name__ == "__main__":
    main()
