"""Learning a repository: fill quality on files an adapter never saw, before and after adapting.

Three permissively licensed PyPI projects that the base corpus does not hold (`PROJECTS`; none
is in `engine/train/distributions.lock`) are fetched once with pip as wheels. Each project's
Python files (tests left out) are split by a hash of their path: 80% to adapt on, 20% to cut
holes from (single lines, multi-line spans, random spans). For each adapter kind (`full`, `lora`)
the benchmark adapts for at most `--minutes` CPU-minutes with the real `dg_engine.adapt.train`
and fills the same holes through the server's pipeline, before and after; it also fills holes
from the held-out standard library with and without the adapter, to see what adapting costs
elsewhere. Recorded: exact match and edit similarity, the diffusion loss on the held files (what the
adapter learnt, whether or not the fills show it), minutes spent, steps and adapter size.

Targets: single-line exact match doubled or up 10 points (whichever is more), and at most
2 points lost on the held-out standard library.

    python -m benchmarks.adapt [--model DIR] [--minutes 20] [--kinds full,lora] [--jobs 2] [--quick]
    python -m benchmarks.adapt --rejudge    # the verdicts of results/adapt.json again, nothing adapted
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

import torch

from dg_engine import EngineConfig, load_engine
from dg_engine.adapt.files import Selection
from dg_engine.adapt.train import AdaptConfig, adapt
from dg_engine.loader import resolve_source
from dg_engine.prompt import FimFormat
from dg_engine.train.corpus import SourceFile
from dg_engine.train.examples import ExampleConfig, ExampleSource
from dg_engine.train.loop import TrainConfig, validate
from dg_lsp.settings import Settings

from . import common
from .features import fills
from .fixtures import model_label, resolve_model
from .heldout import cut_holes, held_out_files
from .quality import score

PROJECTS = (("click", "8.1.8"), ("marshmallow", "3.23.2"), ("toolz", "1.0.0"))
HOLES = {"single_line": 40, "multi_line": 20, "random_span": 20}
STDLIB_HOLES = {"single_line": 40}
# The kinds `cut_holes` gives the holes it cuts for "single_line": a whole line, or a line's rest.
SINGLE_LINE_KINDS = ("whole_line", "rest_of_line")
# The engines' thread count: 0 is the engine's own rule; a `--jobs` worker sets 1 (`one_thread`).
THREADS = 0


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dg-lsp" / "bench-projects"


def fetch(name: str, version: str) -> Path:
    """The project's wheel, downloaded once (pip, no dependencies, wheels only)."""
    dest = cache_dir()
    found = sorted(dest.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    if found:
        return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", str(dest),
                    f"{name}=={version}"], check=True, capture_output=True)
    return sorted(dest.glob(f"{name.replace('-', '_')}-{version}-*.whl"))[0]


def project_files(wheel: Path) -> list[SourceFile]:
    """The wheel's Python sources, without tests."""
    out = []
    with zipfile.ZipFile(wheel) as z:
        for member in sorted(z.namelist()):
            if member.endswith(".py") and "test" not in member.lower() and ".dist-info/" not in member:
                text = z.read(member).decode("utf-8", errors="replace")
                if text.strip():
                    out.append(SourceFile(member, text))
    return out


def split(files: list[SourceFile], share: float = 0.8) -> tuple[list[SourceFile], list[SourceFile]]:
    """(learn, held) by a hash of each path, so the split never depends on the file order."""
    def bucket(f: SourceFile) -> float:
        return int(hashlib.sha256(f.name.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF

    learn = [f for f in files if bucket(f) < share]
    held = [f for f in files if bucket(f) >= share]
    return learn, held


def quality(model: str, cases, adapter: str = "") -> dict:
    engine = load_engine(EngineConfig(model=model, adapter=adapter, threads=THREADS))
    if adapter and "error" in (engine.adapter or {}):
        raise RuntimeError(engine.adapter["error"])
    return score(cases, fills(engine, cases, "fim", Settings()), None)


def held_loss(model: str, held: list[SourceFile], adapter: str = "") -> float:
    """The diffusion loss on holes of the held files, measured as the training measures its held-out
    loss (`loop.validate`, fp32): what adapting learnt, whether or not the fills show it."""
    engine = load_engine(EngineConfig(model=model, adapter=adapter, threads=THREADS, dtype="float32",
                                      quantization="none"))
    source = ExampleSource(held, FimFormat(engine.tokenizer, engine.format.specials), ExampleConfig(max_prompt_tokens=384))
    with torch.no_grad():
        return validate(engine.model, source, TrainConfig(out=""), engine.device)


def adapter_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


def project_cases(name: str, version: str, holes: dict) -> tuple[list[SourceFile], list[SourceFile], list]:
    """(learn files, held files, holes cut from the held files): seeded and hashed, so every process
    that asks gets the same."""
    learn, held = split(project_files(fetch(name, version)))
    return learn, held, cut_holes(held, holes, seed=1)


def project_before(name: str, version: str, model: str, holes: dict) -> dict:
    learn, held, cases = project_cases(name, version, holes)
    return {"project": f"{name}=={version}", "files": {"learn": len(learn), "held": len(held)},
            "holes_by_kind": holes_by_kind(cases), "before": quality(model, cases), "held_loss": held_loss(model, held)}


def adapt_kind(name: str, version: str, model: str, kind: str, minutes: float, holes: dict, stdlib) -> dict:
    """One adapter kind on one project: adapt on the learn files, then fill the project's and the
    standard library's holes with it."""
    learn, held, cases = project_cases(name, version, holes)
    with tempfile.TemporaryDirectory(prefix=f"dg-adapt-{name}-{kind}-") as tmp:
        out = Path(tmp) / "adapter"
        info = adapt(resolve_source(model), Selection(learn), out, Path(tmp) / "run",
                     AdaptConfig(minutes=minutes, kind=kind), workspace=name, progress=False)
        return {"minutes": info.minutes, "steps": info.steps, "tokens": info.tokens,
                "adapter_bytes": adapter_bytes(out), "held_loss": held_loss(model, held, str(out)),
                "after": quality(model, cases, str(out)),
                "stdlib_after": quality(model, stdlib, str(out))}


def one_thread() -> None:
    """Each worker of `--jobs` runs on one thread, so N jobs use N cores and an adapting minute is a
    CPU-minute, as the target counts it."""
    import torch

    global THREADS
    THREADS = 1
    torch.set_num_threads(1)


def run_projects(projects, model: str, kinds: list[str], minutes: float, holes: dict, stdlib, jobs: int) -> list[dict]:
    """Every (project, kind) run, in order, or side by side in `jobs` processes of one thread."""
    for name, version in projects:
        fetch(name, version)  # once, here: workers must not race on a first download
    if jobs <= 1:
        tasks = _Serial()
    else:
        tasks = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=one_thread)
    with tasks:
        stdlib_before = tasks.submit(quality, model, stdlib)
        befores = [tasks.submit(project_before, n, v, model, holes) for n, v in projects]
        afters = [{k: tasks.submit(adapt_kind, n, v, model, k, minutes, holes, stdlib) for k in kinds}
                  for n, v in projects]
        rows = []
        for before, by_kind in zip(befores, afters):
            row = {**before.result(), "stdlib_before": stdlib_before.result()}
            row["kinds"] = {k: f.result() for k, f in by_kind.items()}
            rows.append(row)
    return rows


class _Serial:
    """`submit` that runs at once: the executor interface for `--jobs 1`."""

    def submit(self, fn, *args) -> Future:
        done: Future = Future()
        done.set_result(fn(*args))
        return done

    def __enter__(self) -> "_Serial":
        return self

    def __exit__(self, *exc) -> None:
        return None


def holes_by_kind(cases) -> dict[str, int]:
    return dict(sorted(Counter(c.kind for c in cases).items()))


def single_line_exact(result: dict, counts: dict[str, int]) -> float:
    """Exact match over the single-line holes alone, from the per-kind shares and the hole counts."""
    total = sum(counts.get(k, 0) for k in SINGLE_LINE_KINDS)
    exact = sum(result["exact_match_by_kind"].get(k, 0.0) * counts.get(k, 0) for k in SINGLE_LINE_KINDS)
    return round(exact / total, 4) if total else 0.0


def judge(row: dict) -> dict:
    """Per kind: the single-line target (2x or +10 points) and the stdlib bar (at most -2 points)."""
    out = {}
    before = single_line_exact(row["before"], row["holes_by_kind"])
    for kind, r in row["kinds"].items():
        after = single_line_exact(r["after"], row["holes_by_kind"])
        stdlib = round(r["stdlib_after"]["exact_match"] - row["stdlib_before"]["exact_match"], 4)
        target = round(max(2 * before, before + 0.10), 4)
        out[kind] = {"single_line_before": before, "single_line_after": after, "single_line_target": target,
                     "single_line_met": after >= target, "stdlib_change": stdlib, "stdlib_met": stdlib >= -0.02}
    return out


def rejudge(path: Path) -> None:
    """Judge a written result again without adapting: its holes are cut again (the cut is seeded, the
    split hashed, the wheels cached), which gives each project's hole counts per kind."""
    payload = json.loads(path.read_text())
    holes = payload["settings"]["holes"]
    for row in payload["projects"]:
        name, version = row["project"].split("==")
        row["holes_by_kind"] = holes_by_kind(cut_holes(split(project_files(fetch(name, version)))[1], holes, seed=1))
        row["judged"] = judge(row)
    path.write_text(json.dumps(payload, indent=2) + "\n")


def report(rows: list[dict]) -> None:
    for row in rows:
        for kind, j in row["judged"].items():
            loss = f", held-file loss {row['held_loss']:.4f} -> {row['kinds'][kind]['held_loss']:.4f}" if "held_loss" in row else ""
            print(f"{row['project']} {kind}: single-line EM {j['single_line_before']:.1%} -> {j['single_line_after']:.1%} "
                  f"(target {j['single_line_target']:.1%}), stdlib {j['stdlib_change']:+.1%}{loss}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None)
    p.add_argument("--minutes", type=float, default=20.0, help="adapting time per project and kind")
    p.add_argument("--kinds", default="full,lora")
    p.add_argument("--projects", type=int, default=len(PROJECTS))
    p.add_argument("--jobs", type=int, default=1,
                   help="runs side by side, each in a process of one thread (2 on two cores: a 20-minute run in half the time)")
    p.add_argument("--quick", action="store_true", help="the tiny model, one project, seconds of adapting")
    p.add_argument("--rejudge", action="store_true", help="judge results/adapt.json again, adapting nothing")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rejudge:
        path = common.RESULTS / "adapt.json"
        rejudge(path)
        report(json.loads(path.read_text())["projects"])
        return 0
    model = resolve_model(args.model, args.quick)
    kinds = args.kinds.split(",")
    projects = PROJECTS[: 1 if args.quick else args.projects]
    minutes = 0.05 if args.quick else args.minutes
    holes = {k: 2 for k in HOLES} if args.quick else HOLES
    stdlib = cut_holes(held_out_files(), {"single_line": 2} if args.quick else STDLIB_HOLES, seed=2)
    rows, load = common.under_load(lambda: run_projects(projects, model, kinds, minutes, holes, stdlib, args.jobs))
    for row in rows:
        row["judged"] = judge(row)
    payload = {"model": model_label(model), "quick": args.quick, "load": load,
               "settings": {"minutes": minutes, "kinds": kinds, "holes": holes, "stdlib_holes": len(stdlib),
                            "jobs": args.jobs},
               "projects": rows}
    path = common.write("adapt", payload, quick=args.quick)
    report(rows)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
