"""`dg-lsp adapt`: fine-tune the model on a workspace's own files, in the background, resumably.

The command picks the files (`dg_engine.adapt.files`: git-tracked, not ignored, the configured
languages, size limits, nothing secret-looking), says what it left out and why, lowers its own
priority so the editor stays responsive, and trains for the minutes given. SIGINT or SIGTERM (the
server's "stop") ends the run after the current step: the run's checkpoint is kept, so the same
command later continues where it stopped, and the adapter learned so far is written. With
`--json-progress` it prints one JSON object per line (`{"event": "progress", ...}`), which the
server turns into LSP progress.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _commit(root: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _emit(event: str, **data) -> None:
    print(json.dumps({"event": event, **data}), flush=True)


def run_adapt(args) -> int:
    from dg_engine.adapt import default_location
    from dg_engine.adapt.files import WorkspaceError, select
    from dg_engine.adapt.train import AdaptConfig, adapt
    from dg_engine.loader import resolve_source
    from dg_engine.train.loop import StopSignals

    root = Path(args.dir or ".").resolve()
    try:
        selection = select(root, tuple(args.languages.split(",")), args.max_file_kb * 1024)
    except WorkspaceError as exc:
        print(f"dg-lsp adapt: {exc}", file=sys.stderr)
        return 2
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(selection.skipped.items())) or "none"
    message = f"{len(selection.files)} files ({selection.chars / 1e6:.1f}M characters) from {root}; left out: {skipped}"
    if args.json_progress:
        _emit("files", count=len(selection.files), chars=selection.chars, skipped=dict(selection.skipped))
    else:
        print(message, file=sys.stderr)
    if not selection.files:
        print("dg-lsp adapt: no files to learn from", file=sys.stderr)
        return 2
    home = default_location(root)
    out = Path(args.out).expanduser() if args.out else home / "adapter"
    run_dir = (out.parent if args.out else home) / f"run-{args.kind}"
    if hasattr(os, "nice"):
        os.nice(args.nice)  # the editor and the server come first
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    started = time.time()

    def on_step(state, loss) -> None:
        if args.json_progress and state["step"] % 5 == 0:
            spent = (time.time() - started) / 60
            _emit("progress", step=state["step"], loss=round(loss, 4), minutes=round(spent, 2),
                  percent=min(100, round(100 * spent / args.minutes)))

    config = AdaptConfig(minutes=args.minutes, kind=args.kind, rank=args.rank, seq_len=args.seq_len,
                         batch_size=args.batch_size)
    with StopSignals(lambda text: None) as stop:
        info = adapt(resolve_source(args.model), selection, out, run_dir, config, workspace=str(root),
                     commit=_commit(root), progress=not args.json_progress, should_stop=stop, on_step=on_step)
    if args.json_progress:
        _emit("done", adapter=str(out), stopped=stop.requested, **info.describe())
    else:
        print(f"wrote {out}: {info.kind} adapter, {info.steps} steps, {info.tokens:,} tokens, {info.minutes:.1f} min"
              + (" (stopped; run the same command to continue)" if stop.requested else ""), file=sys.stderr)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("adapt", help="fine-tune the model on a workspace's own code (an adapter)")
    p.add_argument("dir", nargs="?", help="the workspace (a git repository; default: the current folder)")
    p.add_argument("--minutes", type=float, default=20.0, help="training time of this run")
    p.add_argument("--out", help="adapter directory (default: the user's cache, keyed by the workspace)")
    p.add_argument("--kind", choices=("full", "lora"), default="full",
                   help="full: every weight (the embedded model); lora: low-rank deltas (large models)")
    p.add_argument("--rank", type=int, default=16, help="rank of the low-rank deltas (lora)")
    p.add_argument("--languages", default="python", help="comma-separated language ids whose files are read")
    p.add_argument("--max-file-kb", type=int, default=200, help="files larger than this are left out")
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--nice", type=int, default=10, help="how much to lower the process priority")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--json-progress", action="store_true", help="JSON lines on stdout instead of a progress bar")
    p.add_argument("--model", default="embedded", help="the base model: 'embedded' or a model directory")
