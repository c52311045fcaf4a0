"""Memory of the server process: peak RSS in fp32 and int8, and growth over a long session.

A language server lives as long as the editor, next to everything else the user runs, so both
its footprint and its drift matter. For each quantization (none, int8) this starts
`python -m dg_lsp serve`, waits for the model, sends a few requests and records VmHWM (peak RSS),
VmRSS and the engine's own `memoryBytes` from `dg.status`. Then, in the fp32 server, it sends
1,000 mixed requests (edits, inline completion, completion, code actions and their resolution,
status) after a 100-request warm-up, sampling RSS every 100 requests; growth is measured from the
end of the warm-up.

With `--serving-python` the peaks are measured a second time in a serving install (`make
serving-venv`: the package without extras, as `pip install dg-lsp` gives a user), which is what
the peak target is judged on: the dev install's extras bring scipy and accelerate, which
transformers imports into the server when they are present.

    python -m benchmarks.memory [--quick] [--model embedded] [--requests 1000] [--warmup 100]
        [--serving-python .venv-serving/bin/python]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from lsprotocol import types

from . import common
from .fixtures import held_out_sources, model_label, resolve_model
from .lspclient import Mirror, Server

TARGETS = {"peak_rss_mb": 500.0, "growth_pct": 5.0}
SERVING_PYTHON = ".venv-serving/bin/python"
MB = 2**20
# (kind, weight): what an editor sends over a working session, roughly.
MIX = (("edit", 30), ("inline", 25), ("completion", 15), ("code_action", 12), ("resolve", 4), ("status", 14))
SNIPPET = "value = compute(x)\n"


class Session:
    """Documents open in one server and a seeded stream of mixed requests against them."""

    def __init__(self, server: Server, seed: int = 0, docs: int = 3):
        self.server = server
        self.rng = random.Random(seed)
        self.mirrors = [Mirror(server, f"mem{i}-{s.name.replace('/', '_')}", s.text) for i, s in enumerate(held_out_sources(docs))]
        self.inserted: dict[int, int | None] = {i: None for i in range(len(self.mirrors))}
        self.counts: dict[str, int] = {k: 0 for k, _ in MIX}
        self.errors: list[str] = []

    def _line_end(self, mirror: Mirror) -> int:
        lines = mirror.text.count("\n")
        line = self.rng.randrange(max(1, lines))
        start = 0
        for _ in range(line):
            start = mirror.text.index("\n", start) + 1
        end = mirror.text.find("\n", start)
        return len(mirror.text) if end < 0 else end

    def _edit(self, i: int, mirror: Mirror) -> None:
        # Alternate inserting and deleting a line, so that the documents do not grow.
        at = self.inserted[i]
        if at is None:
            at = self._line_end(mirror) + 1 if mirror.text.count("\n") else 0
            at = min(at, len(mirror.text))
            mirror.replace(at, at, SNIPPET)
            self.inserted[i] = at
        else:
            mirror.replace(at, at + len(SNIPPET), "")
            self.inserted[i] = None

    async def one(self) -> None:
        kind = self.rng.choices([k for k, _ in MIX], weights=[w for _, w in MIX])[0]
        i = self.rng.randrange(len(self.mirrors))
        mirror = self.mirrors[i]
        doc = types.TextDocumentIdentifier(mirror.uri)
        self.counts[kind] += 1
        client = self.server.client
        try:
            if kind == "edit":
                self._edit(i, mirror)
            elif kind == "inline":
                await client.text_document_inline_completion_async(mirror.inline_params(self._line_end(mirror)))
            elif kind == "completion":
                await client.text_document_completion_async(types.CompletionParams(doc, mirror.position(self._line_end(mirror))))
            elif kind in ("code_action", "resolve"):
                pos = mirror.position(self._line_end(mirror))
                actions = await client.text_document_code_action_async(types.CodeActionParams(
                    doc, types.Range(pos, pos), types.CodeActionContext(diagnostics=[])))
                if kind == "resolve" and actions:
                    await client.code_action_resolve_async(actions[0])
            else:
                await self.server.command("dg.status")
        except Exception as exc:  # counted, not fatal: the benchmark measures memory, not answers
            self.errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:200])

    async def run(self, n: int) -> None:
        for _ in range(n):
            await self.one()


async def footprint(model: str, quantization: str, growth: tuple[int, int, int] | None, quick: bool,
                    python: str | None = None) -> dict:
    extra = ["--quantization", quantization] if quantization != "none" else []
    # Quick runs only prove the machinery works: one thread and a small context keep fills cheap.
    extra += ["--threads", "1"] if quick else []
    options = {"contextBudget": 256} if quick else {}
    async with Server(model, *extra, options=options, python=python) as server:
        loaded_rss = server.rss()
        session = Session(server)
        initial = 3 if quick else 10
        await session.run(initial)  # "a few requests"
        status = await server.command("dg.status")
        out = {
            "quantization": quantization,
            "rss_after_load_mb": round(loaded_rss / MB, 1),
            "rss_after_requests_mb": round(server.rss() / MB, 1),
            "peak_rss_mb": round(server.peak_rss() / MB, 1),
            **{f"{key.lower()}_after_requests_mb": round(value / MB, 1) for key, value in server.rss_parts().items()},
            "engine_memory_mb": round(status["memoryBytes"] / MB, 2),
            "parameters": status["parameters"],
            "dtype": status["dtype"],
        }
        if growth is not None:
            warmup, requests, every = growth
            started = time.perf_counter()
            await session.run(warmup)
            base = server.rss()
            samples = [(0, round(base / MB, 2))]
            for done in range(every, requests + 1, every):
                await session.run(every)
                samples.append((done, round(server.rss() / MB, 2)))
            final = server.rss()
            out["growth"] = {
                "initial_requests": initial, "warmup_requests": warmup, "requests": requests,
                "rss_start_mb": round(base / MB, 2), "rss_end_mb": round(final / MB, 2),
                "growth_pct": round((final - base) / base * 100, 3),
                "samples": samples,
                "counts": session.counts, "errors": len(session.errors), "error_samples": session.errors[:5],
                "seconds": round(time.perf_counter() - started, 1),
                "peak_rss_mb": round(server.peak_rss() / MB, 1),
            }
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny model, 16 requests after 4 of warm-up")
    p.add_argument("--model", default=None)
    p.add_argument("--quantizations", default="none,int8")
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--serving-python", default=SERVING_PYTHON if Path(SERVING_PYTHON).exists() else None,
                   help="the interpreter of a serving install (`make serving-venv`: no extras); its peak is measured "
                        "too (default: .venv-serving/bin/python when it exists)")
    return p.parse_args(argv)


def installed(python: str, modules: tuple[str, ...] = ("scipy", "accelerate", "datasketch")) -> dict[str, bool]:
    """Which of the optional heavy modules an environment has (transformers imports them if present)."""
    code = f"import importlib.util as u; print(*[u.find_spec(m) is not None for m in {modules!r}])"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return dict(zip(modules, (value == "True" for value in out)))


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    model = resolve_model(args.model, args.quick)
    requests, warmup = (16, 4) if args.quick else (args.requests, args.warmup)
    every = max(1, requests // 10)
    quants = args.quantizations.split(",")
    load_before = os.getloadavg()
    runs = [asyncio.run(footprint(model, q, (warmup, requests, every) if i == 0 else None, args.quick)) for i, q in enumerate(quants)]
    for run in runs:
        run["install"] = "dev"
    serving = []
    if args.serving_python:
        serving = [asyncio.run(footprint(model, q, None, args.quick, python=args.serving_python)) for q in quants]
        for run in serving:
            run["install"] = "serving"
    load_after = os.getloadavg()
    growth = runs[0].get("growth", {})
    payload = {
        "model": model_label(model),
        "quick": args.quick,
        "settings": {"quantizations": quants, "requests": requests, "warmup": warmup, "sample_every": every,
                     "mix": dict(MIX), "growth_server": quants[0], "rss": "/proc/<pid>/status VmRSS, peak VmHWM; RssAnon (private) and RssFile (mapped files) after the requests"},
        "load": {"before": load_before, "after": load_after},
        "installs": {"dev": {"python": sys.executable, **installed(sys.executable)},
                     **({"serving": {"python": args.serving_python, **installed(args.serving_python)}} if serving else {})},
        "targets": TARGETS,
        "target_met": {
            # What a user's install holds: the serving one when it was measured.
            "peak_rss": all(r["peak_rss_mb"] <= TARGETS["peak_rss_mb"] for r in serving or runs),
            "peak_rss_dev": all(r["peak_rss_mb"] <= TARGETS["peak_rss_mb"] for r in runs),
            "growth": growth.get("growth_pct", 1e9) < TARGETS["growth_pct"],
        },
        "runs": runs + serving,
    }
    path = common.write("memory", payload, quick=args.quick)
    for r in runs + serving:
        print(f"memory {r['install']} {r['quantization']}: peak {r['peak_rss_mb']} MB, rss {r['rss_after_requests_mb']} MB, engine {r['engine_memory_mb']} MB")
    if growth:
        print(f"memory growth over {growth['requests']} requests: {growth['rss_start_mb']} -> {growth['rss_end_mb']} MB "
              f"({growth['growth_pct']}%), {growth['errors']} errors, {growth['seconds']} s")
    print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
