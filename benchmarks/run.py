"""Run the benchmarks, then write SUMMARY.md and the plots: what `make bench`, `make bench-full` and
`make bench-quick` do.

`make bench` runs every benchmark at the smaller sizes of `STANDARD` (a few minutes on two cores);
`--full` runs each benchmark's own defaults (about half an hour), which is what the published
tables come from; `--quick` runs each one on a tiny random model in seconds, as `make test` does.
Each result file records the sizes it was measured at.

Each benchmark is a module with `main(argv)`; this runner calls them in turn with the shared
options (sizes, `--model`), keeps going when one fails (and says which at the end, with a
non-zero exit status), and includes the fill-quality and reliability benchmarks when their modules
exist. `--only typing,decode` runs a subset; the summary still includes every result file present.

    python -m benchmarks.run [--full | --quick] [--only name,...] [--model DIR]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
import traceback

OWN = ("typing", "decode", "kv_reuse", "memory", "gpu", "next_edit", "prose", "layouts", "obvious", "healing")
OTHERS = ("quality", "reliability", "features")  # written alongside; run when present
# Benchmarks whose --model means the diffusion model under test (gpu's means the tokens/s model).
TAKES_MODEL = set(OWN) | {"features"}
# The sizes `make bench` uses: large enough for medians and rates that mean something, small
# enough to finish in minutes. The memory benchmark's growth is then over 300 requests, not 1,000.
STANDARD = {
    "typing": ["--bodies", "2", "--single-thread-check", "0", "--long-bodies", "2"],
    "decode": ["--cases", "5", "--repeats", "2"],
    "memory": ["--requests", "300", "--warmup", "50"],
    "quality": ["--limit", "8", "--heldout", "24"],
    "features": ["--cases", "4", "--humaneval", "3"],
    "next_edit": ["--per-kind", "10"],
    "prose": ["--paragraphs", "10"],
    "layouts": ["--cases", "10"],
    "healing": ["--cases", "80"],
    "reliability": ["--standard"],
}


def available(name: str) -> bool:
    return importlib.util.find_spec(f"benchmarks.{name}") is not None


def sizes(name: str, quick: bool, full: bool) -> list[str]:
    """The size options one benchmark runs with."""
    if quick:
        return ["--quick"]
    return [] if full else list(STANDARD.get(name, []))


def run_one(name: str, argv: list[str], model: str | None) -> tuple[bool, float, str]:
    argv = list(argv)
    if model and name in TAKES_MODEL:
        argv += ["--model", model]
    started = time.perf_counter()
    try:
        module = importlib.import_module(f"benchmarks.{name}")
        status = module.main(argv)
        if isinstance(status, int) and not isinstance(status, bool) and status != 0:
            return False, time.perf_counter() - started, f"returned {status}"
    except SystemExit as exc:  # argparse errors and explicit exits
        if exc.code not in (0, None):
            return False, time.perf_counter() - started, f"exited with {exc.code}"
    except Exception:
        return False, time.perf_counter() - started, traceback.format_exc(limit=6)
    return True, time.perf_counter() - started, ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="every benchmark's quick mode (tiny model, seconds each)")
    size.add_argument("--full", action="store_true", help="every benchmark at its own default sizes (about half an hour)")
    p.add_argument("--only", default=None, help=f"comma-separated subset of {', '.join(OWN + OTHERS)}")
    p.add_argument("--model", default=None, help="diffusion model for the speed and memory benchmarks")
    p.add_argument("--no-summary", action="store_true")
    args = p.parse_args(argv)
    names = args.only.split(",") if args.only else [*OWN, *[n for n in OTHERS if available(n)]]
    unknown = [n for n in names if n not in OWN + OTHERS]
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(unknown)}")
    failures = []
    for name in names:
        if name in OTHERS and not available(name):
            print(f"== {name}: not present, skipped", flush=True)
            continue
        print(f"== {name}", flush=True)
        ok, seconds, why = run_one(name, sizes(name, args.quick, args.full), args.model)
        print(f"== {name}: {'ok' if ok else 'FAILED'} in {seconds:.0f} s", flush=True)
        if not ok:
            print(why, file=sys.stderr)
            failures.append(name)
    if not args.no_summary:
        from . import summary

        summary.main(["--quick"] if args.quick else [])
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
