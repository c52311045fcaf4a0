"""Run the benchmarks, then write SUMMARY.md and the plots: what `make bench` and `make bench-quick` do.

Each benchmark is a module with `main(argv)`; this runner calls them in turn with the shared
options (`--quick`, `--model`), keeps going when one fails (and says which at the end, with a
non-zero exit status), and includes the fill-quality and reliability benchmarks when their modules
exist. `--only typing,decode` runs a subset; the summary still includes every result file present.

    python -m benchmarks.run [--quick] [--only name,...] [--model DIR]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
import traceback

OWN = ("typing", "decode", "kv_reuse", "memory", "gpu")
OTHERS = ("quality", "reliability", "features")  # written alongside; run when present
# Benchmarks whose --model means the diffusion model under test (gpu's means the tokens/s model).
TAKES_MODEL = set(OWN) | {"features"}


def available(name: str) -> bool:
    return importlib.util.find_spec(f"benchmarks.{name}") is not None


def run_one(name: str, quick: bool, model: str | None) -> tuple[bool, float, str]:
    argv = ["--quick"] if quick else []
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
    p.add_argument("--quick", action="store_true", help="every benchmark's quick mode (tiny model, seconds each)")
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
        ok, seconds, why = run_one(name, args.quick, args.model)
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
