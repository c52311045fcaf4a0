"""Reliability figures: cancellation latency, fuzz inputs survived, exit times, soak memory growth.

    python -m benchmarks.reliability [--quick]

Everything runs against the real server process over raw stdio (tests/raw_client.py) with the
tiny random model and one torch thread, so the figures measure the server's own machinery, not
a model's speed:

* cancellation: a long inline request (400 steps on a 256-token canvas) is cancelled once the
  worker is denoising; the time from sending `$/cancelRequest` to the RequestCancelled reply,
  and the model passes made after the reply (the worker must stop within one step). The same
  for a request queued behind a running one, which must never run.
* fuzz: seeded random sessions (tests/lsp_fuzz.py) against one long-lived server: inputs
  survived, crashes, requests without a reply, replies slower than 5 s.
* exit: from closing stdin (with the model busy), killing the editor process whose pid was
  given as processId, and sending `exit` after `shutdown`, to the process having exited.
* soak: 1,000 mixed operations with 100 cancellations (tests/lsp_soak.py); RSS after a 100-request
  warm-up and after the rest, read after Python's collector and glibc's malloc_trim(0) as in the
  test (see lsp_soak.py for why), and once more read as is, for comparison.

Writes benchmarks/results/reliability.json (reliability.quick.json with --quick).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import summary, write

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from lsp_fuzz import FuzzRunner, session  # noqa: E402
from lsp_soak import SOAK_SETTINGS, soak  # noqa: E402
from raw_client import RawServer, inline_params, reliability_env, tiny_model_dir  # noqa: E402

LONG = {"maxSteps": 400, "canvasLength": 256}
SHORT = {"maxSteps": 2, "canvasLength": 8}


def start(root: Path, options: dict | None = None, env: dict | None = None, **kwargs) -> RawServer:
    server = RawServer(reliability_env(**(env or {})))
    server.initialize({"model": str(tiny_model_dir()), **SHORT, **(options or {})}, root=root, **kwargs)
    return server


def configure(server: RawServer, settings: dict) -> None:
    server.notify("workspace/didChangeConfiguration", {"settings": {"dgLsp": settings}})
    server.command("dg.status")


def wait_running(server: RawServer, since: int) -> None:
    deadline = time.monotonic() + 30
    while server.forward_passes() <= since + 1:
        if time.monotonic() > deadline:
            raise RuntimeError("the long request never started")
        time.sleep(0.005)


def wait_settled(server: RawServer) -> int:
    last = server.forward_passes()
    while True:
        time.sleep(0.3)
        now = server.forward_passes()
        if now == last:
            return now
        last = now


def cancellation(root: Path, runs: int) -> dict:
    server = start(root)
    try:
        server.wait_ready()
        configure(server, LONG)
        running_ms, queued_ms, passes_after = [], [], []
        queued_ran = 0
        for i in range(runs):
            a = (root / f"cancel-a{i}.py").as_uri()
            b = (root / f"cancel-b{i}.py").as_uri()
            server.open(a, "def slow(a, b):\n    \n")
            server.open(b, "def queued(c):\n    \n")
            start_passes = server.forward_passes()
            running = server.request("textDocument/inlineCompletion", inline_params(a, 1, 4))
            wait_running(server, start_passes)
            queued = server.request("textDocument/inlineCompletion", inline_params(b, 1, 4))
            server.command("dg.status")
            sent = time.perf_counter()
            server.cancel(queued)
            reply = server.wait_reply(queued, 10)
            assert reply.get("error", {}).get("code") == -32800, reply
            queued_ms.append((server.reply_times[queued] - sent) * 1000)
            sent = time.perf_counter()
            server.cancel(running)
            reply = server.wait_reply(running, 10)
            assert reply.get("error", {}).get("code") == -32800, reply
            running_ms.append((server.reply_times[running] - sent) * 1000)
            at_reply = server.forward_passes()
            settled = wait_settled(server)
            passes_after.append(settled - at_reply)
            if settled - start_passes >= 400:
                queued_ran += 1
        all_ms = running_ms + queued_ms
        return {
            "runs": runs,
            "answered_within_100ms_share": round(sum(ms <= 100 for ms in all_ms) / len(all_ms), 3),
            "running": {"reply_ms": summary(running_ms),
                        "answered_within_100ms_share": round(sum(ms <= 100 for ms in running_ms) / runs, 3),
                        "passes_after_reply_max": max(passes_after)},
            "queued": {"reply_ms": summary(queued_ms),
                       "answered_within_100ms_share": round(sum(ms <= 100 for ms in queued_ms) / runs, 3),
                       "ran_anyway": queued_ran},
        }
    finally:
        server.close()


def fuzz(root: Path, sessions: int, size: int) -> dict:
    runner = FuzzRunner(root)
    started = time.perf_counter()
    try:
        for seed in range(sessions):
            runner.run(session(random.Random(seed), root.as_uri(), runner.ids, size))
        stats = runner.stats
        return {
            "inputs": stats.inputs, "sessions": stats.sessions, "requests": stats.requests,
            "replies": stats.replies, "null_id_error_replies": stats.null_replies,
            "inputs_survived": stats.inputs if stats.crashes == 0 else None,
            "crashes": stats.crashes, "unreplied": stats.unreplied, "stalls_over_5s": stats.stalls,
            "duplicate_or_unknown_replies": stats.duplicate_or_unknown_replies,
            "handler_errors": stats.handler_errors, "slowest_reply_ms": round(stats.slowest_reply_s * 1000, 1),
            "model_passes": runner.server.forward_passes(), "seconds": round(time.perf_counter() - started, 1),
            "problems": stats.problems[:5],
        }
    finally:
        runner.close()


def exit_times(root: Path, runs: int) -> dict:
    stdin_s, parent_s, exit_s, codes = [], [], [], {"stdin_close": [], "parent_death": [], "exit_after_shutdown": []}
    for _ in range(runs):
        server = start(root, LONG)
        try:
            server.wait_ready()
            uri = (root / "exit.py").as_uri()
            server.open(uri, "def f(x):\n    \n")
            start_passes = server.forward_passes()
            server.request("textDocument/inlineCompletion", inline_params(uri, 1, 4))
            wait_running(server, start_passes)  # the model is busy when stdin closes
            closed = time.perf_counter()
            server.proc.stdin.close()
            codes["stdin_close"].append(server.wait_exit(30))
            stdin_s.append(time.perf_counter() - closed)
        finally:
            server.close()

        editor = subprocess.Popen(["sleep", "600"])
        server = start(root, process_id=editor.pid, initialized=False)
        try:
            server.command("dg.status")
            editor.kill()
            killed = time.perf_counter()
            codes["parent_death"].append(server.wait_exit(30))
            parent_s.append(time.perf_counter() - killed)
        finally:
            editor.wait()
            server.close()

        server = start(root, initialized=False)
        try:
            server.call("shutdown")
            sent = time.perf_counter()
            server.notify("exit")
            codes["exit_after_shutdown"].append(server.wait_exit(30))
            exit_s.append(time.perf_counter() - sent)
        finally:
            server.close()
    return {
        "runs": runs,
        "stdin_close_s": summary(stdin_s),
        "parent_death_s": summary(parent_s),
        "exit_after_shutdown_s": summary(exit_s),
        "exit_codes": codes,
    }


def soak_run(root: Path, total: int, cancels: int, warmup: int, trim: bool) -> dict:
    server = RawServer(reliability_env(faults=trim))
    server.initialize(SOAK_SETTINGS, root=root)
    try:
        server.wait_ready()
        result = soak(server, root, total=total, cancels=cancels, warmup=warmup, trim=trim)
        return {
            "operations": result.operations, "requests": result.requests, "cancels_sent": result.cancels_sent,
            "cancelled_replies": result.cancelled_replies, "error_replies": result.errors,
            "unreplied": result.unreplied, "warmup_requests": warmup,
            "rss_after_warmup_kib": result.rss_warm_kib, "rss_end_kib": result.rss_end_kib,
            "rss_growth_percent": round(result.growth * 100, 2), "seconds": round(result.seconds, 1),
            "rss_read_after": "gc.collect() and malloc_trim(0)" if trim else "nothing (allocator keeps freed memory)",
        }
    finally:
        server.close()


# Runs per check at each size: (cancellations, fuzz sessions, exit runs, soak operations, soak cancels).
PLANS = {
    size: dict(zip(("cancel_runs", "fuzz_sessions", "exit_runs", "soak_operations", "soak_cancels"), runs))
    for size, runs in {"quick": (5, 40, 1, 300, 30), "standard": (10, 100, 1, 400, 40), "full": (30, 400, 3, 1000, 100)}.items()
}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reliability", description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer runs, for a smoke test")
    size.add_argument("--standard", action="store_true", help="the sizes `make bench` uses (about a third of the runs)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    quick = args.quick
    plan = {**PLANS["quick" if quick else "standard" if args.standard else "full"],
            "fuzz_session_inputs": 25, "soak_warmup_requests": 100}
    root = Path(tempfile.mkdtemp(prefix="dg-lsp-reliability-"))
    results = {}
    started = time.perf_counter()
    print("cancellation ...", flush=True)
    results["cancellation"] = cancellation(root, plan["cancel_runs"])
    print("fuzz ...", flush=True)
    results["fuzz"] = fuzz(root, plan["fuzz_sessions"], plan["fuzz_session_inputs"])
    print("exit times ...", flush=True)
    results["exit"] = exit_times(root, plan["exit_runs"])
    print("soak ...", flush=True)
    results["soak"] = soak_run(root, plan["soak_operations"], plan["soak_cancels"], plan["soak_warmup_requests"], True)
    print("soak, RSS read without trimming ...", flush=True)
    results["soak_untrimmed"] = soak_run(root, plan["soak_operations"], plan["soak_cancels"],
                                         plan["soak_warmup_requests"], False)
    payload = {
        "quick": quick,
        "model": {"name": "tiny random DiffusionGemma (dg_engine.tiny)", "path": str(tiny_model_dir())},
        "settings": {"server_env": {"OMP_NUM_THREADS": "1"}, "fuzz": SHORT, "soak": SOAK_SETTINGS,
                     "cancellation": LONG, **plan},
        "load": None,
        **results,
        "seconds": round(time.perf_counter() - started, 1),
    }
    path = write("reliability", payload, quick=quick)
    print(f"wrote {path}")
    c, f, e, s = results["cancellation"], results["fuzz"], results["exit"], results["soak"]
    print(f"cancel: {c['answered_within_100ms_share']:.0%} within 100 ms; running p50 {c['running']['reply_ms']['p50']} ms, "
          f"p95 {c['running']['reply_ms']['p95']} ms; passes after reply <= {c['running']['passes_after_reply_max']}")
    print(f"fuzz: {f['inputs']} inputs, {f['crashes']} crashes, {f['unreplied']} unreplied, {f['stalls_over_5s']} stalls")
    print(f"exit: stdin {e['stdin_close_s']['p50']} s, parent {e['parent_death_s']['p50']} s, "
          f"exit {e['exit_after_shutdown_s']['p50']} s")
    print(f"soak: RSS {s['rss_growth_percent']}% after warm-up "
          f"({results['soak_untrimmed']['rss_growth_percent']}% untrimmed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
