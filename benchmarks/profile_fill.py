"""Where the time of one keystroke's fill goes: cProfile and the torch profiler, in one process.

When a latency target is missed, the question is which stage to fix: context extraction
(tree-sitter), tokenization, the encoder prefill, the decoder steps, or post-processing. This
replays part of a typing session through the server's own pipeline (`DocumentStore` edits, then
`dg_lsp.fill.run_fill` with the engine's prefix cache, as the worker runs it) and prints the
top functions by cumulative time and the top torch operators, and the same figures as JSON.

    python -m benchmarks.profile_fill [--model embedded] [--edits 40] [--threads 0]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time

import torch
from lsprotocol import types

from . import common
from .fixtures import function_bodies, model_label, resolve_model, typing_edits
from .lspclient import utf16_position


def replay(engine, edits: int, profile_torch: bool) -> dict:
    from dg_lsp.documents import DocumentStore
    from dg_lsp.fill import FillJob, ResultCache, run_fill
    from dg_lsp.scheduler import CancelToken
    from dg_lsp.settings import Settings
    from dg_lsp.syntax_trees import make_tree

    body = function_bodies(1)[0]
    store = DocumentStore(make_tree)
    uri = "file:///profile.py"
    text = body.text[: body.start] + body.text[body.end :]
    store.open(types.TextDocumentItem(uri, "python", 1, text))
    settings, cache = Settings(), ResultCache()
    cursor, version, latencies = body.start, 1, []

    def keystroke(edit: str) -> None:
        nonlocal cursor, version, text
        pos = utf16_position(text, cursor)
        version += 1
        store.change(uri, version, [types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text=edit)])
        text = text[:cursor] + edit + text[cursor:]
        cursor += len(edit)
        snapshot = store.snapshot(uri)
        started = time.perf_counter()
        run_fill(engine, FillJob(snapshot=snapshot, start=cursor, end=cursor, mode="inline", settings=settings), CancelToken(), cache=cache)
        latencies.append((time.perf_counter() - started) * 1000)

    stream = typing_edits(body.body)
    for edit in stream[:5]:  # warm-up: the first fill is a cold prefill
        keystroke(edit)
    latencies.clear()
    profiler = cProfile.Profile()
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities) if profile_torch else _null() as tprof:
        profiler.enable()
        for edit in stream[5 : 5 + edits]:
            keystroke(edit)
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
    result = {"body": f"{body.module}:{body.function}", "fills": len(latencies), "fill_ms": common.summary(latencies),
              "cprofile_top": out.getvalue()}
    if tprof is not None:
        result["torch_ops"] = tprof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
    return result


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def main(argv: list[str] | None = None) -> dict:
    from dg_engine import EngineConfig, load_engine

    p = argparse.ArgumentParser(prog="python -m benchmarks.profile_fill", description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--edits", type=int, default=40)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--no-torch", action="store_true", help="cProfile only")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    model = resolve_model(args.model, args.quick)
    engine = load_engine(EngineConfig(model=model))
    result = replay(engine, 5 if args.quick else args.edits, not args.no_torch)
    print(result["cprofile_top"])
    if "torch_ops" in result:
        print(result["torch_ops"])
    print(f"fill ms: {json.dumps(result['fill_ms'])}")
    payload = {"model": model_label(model), "quick": args.quick, "settings": {"threads": torch.get_num_threads(), "edits": args.edits}, **result}
    print(f"wrote {common.write('profile_fill', payload, quick=args.quick)}")
    return payload


if __name__ == "__main__":
    main()
