"""`python -m dg_engine.train`: train (or resume) the embedded model, optionally export it.

The pipeline is corpus (`corpus.py`, `corpus_build.py`), tokenizer (`tokenizer.py`), examples
(`examples.py` holes, `sequences.py` rows, `streams.py` token streams), objective (`blocks.py`;
the one-canvas `objective.py` is kept to compare against), loop (`loop.py`) and export
(`checkpoint.py`, `resume.py`). Examples::

    # the long run's pieces: block-parallel rows from the built corpus, N minutes each
    python -m dg_engine.train --size base --minutes 140 --out runs/embedded \\
        --export engine/embedded --save-state engine/train/state
    python -m dg_engine.train continue --minutes 140     # the next piece, from the committed state
    python -m dg_engine.train baseline --minutes 140     # the AR baseline: same data, same tokens
    # the one-canvas trainer on the standard library, as the first embedded model was trained
    python -m dg_engine.train --layout canvas --corpus stdlib --out runs/old --size small --steps 4000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .corpus import HELD_OUT
from .loop import UNBOUNDED_STEPS, TrainConfig
from .objective import ObjectiveConfig
from .model import SIZES
from .parallel import launch
from .resume import AR_STATE_DIR, STATE_DIR, last_value, read_state
from .run import MIN_SEQ_LEN, prepare, run_piece
from .sequences import MixConfig


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m dg_engine.train", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto")
    p.add_argument("--out", required=True, help="run directory (checkpoints, log.csv); resumed if it has one")
    p.add_argument("--tokenizer", default=None,
                   help="tokenizer directory (trained there if missing); default: the shipped model's")
    p.add_argument("--steps", type=int, default=None, help="default 4000, or no limit with --minutes")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="threads per training process")
    p.add_argument("--procs", type=int, default=1,
                   help="training processes on this machine, each with its share of every batch "
                        "(CPU, block layout; one thread each unless --threads; about 5-7 GB of memory each)")
    p.add_argument("--objective", choices=("diffusion", "ar"), default="diffusion")
    p.add_argument("--layout", choices=("blocks", "canvas"), default="blocks",
                   help="blocks: every token of a row carries a loss; canvas: one canvas per prompt")
    p.add_argument("--corpus", choices=("built", "stdlib"), default="built",
                   help="built: the corpus cache (python -m dg_engine.train.corpus build); stdlib: the library only")
    p.add_argument("--corpus-cache", default=None, help="the built corpus's folder (default ~/.cache/dg-lsp/corpus)")
    p.add_argument("--size", choices=tuple(SIZES), default="small")
    p.add_argument("--layers", type=int, default=None,
                   help="text layers, if not the size's (a state grown by `python -m dg_engine.train.grow` passes it on)")
    p.add_argument("--seq-len", type=int, default=MixConfig.seq_len, help="tokens per block-parallel row")
    p.add_argument("--fim-share", type=float, default=MixConfig.fim_share)
    p.add_argument("--prose-share", type=float, default=MixConfig.prose_share)
    p.add_argument("--fim-per-row", type=int, default=MixConfig.fim_per_row, help="FIM holes packed into one row, at most")
    p.add_argument("--middle-weight", type=float, default=MixConfig.middle_weight,
                   help="diffusion-loss weight of a FIM middle's tokens (code tokens weigh 1)")
    p.add_argument("--edit-share", type=float, default=MixConfig.edit_share,
                   help="share of rows that are edit traces (next-edit suggestions)")
    p.add_argument("--aux-weight", type=float, default=ObjectiveConfig.aux_weight,
                   help="weight of the next-token loss beside the diffusion loss (the head that leads a fill)")
    p.add_argument("--max-prompt-tokens", type=int, default=768)
    p.add_argument("--canvas-draws", type=int, default=1,
                   help="noisy copies of each canvas per prompt, at stratified noise levels (canvas layout)")
    p.add_argument("--rename-prob", type=float, default=0.0,
                   help="share of FIM examples whose identifiers are renamed consistently (0-1)")
    p.add_argument("--corpus-root", default=None,
                   help="a CPython 3.11 Lib/ folder to read instead of this interpreter's library")
    p.add_argument("--with-tests", action="store_true",
                   help="also train on the library's test suites (never those of held-out modules)")
    p.add_argument("--dtype", choices=("auto", "bf16", "fp32"), default="auto",
                   help="auto: bf16 autocast where the hardware has bf16 (AMX, AVX-512 BF16, CUDA)")
    p.add_argument("--bf16", action="store_true", help="the same as --dtype bf16")
    p.add_argument("--schedule", choices=("cosine", "piece"), default=None,
                   help="cosine over --steps, or piece: warm up, hold, anneal before --minutes end "
                        "(the default with --minutes)")
    p.add_argument("--minutes", type=float, default=None, help="minutes of training in this invocation")
    p.add_argument("--decay-share", type=float, default=TrainConfig.decay_share,
                   help="the piece schedule's anneal: this share of --minutes at its end (a short piece wants more)")
    p.add_argument("--export", default=None, help="write a model directory here when training ends")
    p.add_argument("--save-state", default=None, help="write the small resume state here when training ends")
    p.add_argument("--resume-state", default=None,
                   help="start from this committed state when --out has no checkpoint")
    p.add_argument("--time-limit", type=float, default=None, help="minutes of training in all pieces together")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="tokens processed in all pieces together, at most (a baseline's budget)")
    p.add_argument("--save-every", type=int, default=250)
    p.add_argument("--val-every", type=int, default=250)
    p.add_argument("--corpus-limit", type=int, default=None, help="use only the first N files (smoke tests)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if not 0.0 < args.decay_share <= 1.0:
        p.error("--decay-share must be above 0 and at most 1")
    if args.aux_weight < 0:
        p.error("--aux-weight must be at least 0")
    if args.canvas_draws < 1:
        p.error("--canvas-draws must be at least 1")
    if not 0.0 <= args.rename_prob <= 1.0:
        p.error("--rename-prob must be between 0 and 1")
    shares = (args.fim_share, args.prose_share, args.edit_share)
    if not (all(0.0 <= x <= 1.0 for x in shares) and sum(shares) <= 1.0 + 1e-9):
        p.error("--fim-share, --prose-share and --edit-share must be shares that add up to at most 1")
    if args.corpus_root:
        missing = [name for name in HELD_OUT if not (Path(args.corpus_root) / name).is_file()]
        if missing:
            p.error(f"--corpus-root {args.corpus_root} is not a CPython 3.11 Lib/ folder: no {missing[0]}")
    if args.layout == "blocks" and args.seq_len < MIN_SEQ_LEN:
        p.error(f"--seq-len must be at least {MIN_SEQ_LEN}: a row holds a prompt and two 64-token middle blocks")
    if args.procs < 1:
        p.error("--procs must be at least 1")
    if args.layers is not None and args.layers < 1:
        p.error("--layers must be at least 1")
    if args.procs > 1 and (args.layout != "blocks" or args.device == "cuda"):
        p.error("--procs above 1 trains the block layout on the CPU only")
    if args.procs > 1 and args.batch_size % args.procs:
        p.error(f"--batch-size {args.batch_size} cannot be shared evenly by --procs {args.procs}")
    if args.bf16:
        args.dtype = "bf16"
    if args.steps is None:
        args.steps = UNBOUNDED_STEPS if args.minutes else 4000
    if args.schedule is None:
        args.schedule = "piece" if args.minutes else "cosine"
    return args


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "continue":
        return continue_run(argv[1:])
    if argv and argv[0] == "baseline":
        return baseline_run(argv[1:])
    args = parse_args(argv)
    args.argv = argv
    if args.procs > 1:
        prepare(args)
    launch(run_piece, args, args.procs)


def _piece_parser(prog: str, description: str, state: Path, out: str, export: str) -> argparse.ArgumentParser:
    """The options of one piece of a run kept in a resume state: the rest comes from the state."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--minutes", type=float, required=True)
    p.add_argument("--state", default=str(state))
    p.add_argument("--out", default=out)
    p.add_argument("--export", default=export, help="the piece's model")
    p.add_argument("--threads", type=int, default=None, help="threads per training process")
    p.add_argument("--device", default=None)
    p.add_argument("--procs", type=int, default=None, help="training processes (CPU), for this piece only")
    p.add_argument("--decay-share", type=float, default=None, help="share of the piece that anneals, for this piece only")
    return p


def _piece_argv(run_argv: list[str], args: argparse.Namespace, resume: bool) -> list[str]:
    """A stored command line with this piece's own options in place of the last piece's."""
    keep = _drop_options(run_argv, {"--minutes", "--out", "--export", "--save-state", "--resume-state",
                                    "--threads", "--device", "--procs", "--decay-share"})
    more = ["--minutes", str(args.minutes), "--out", args.out, "--export", args.export, "--save-state", args.state]
    if resume:
        more += ["--resume-state", args.state]
    for name in ("threads", "device", "procs", "decay_share"):
        if getattr(args, name):
            more += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    return keep + more


def continue_run(argv: list[str]) -> None:
    """`continue --minutes N [--state DIR] [--out RUN] [--export DIR]`: the next piece of the run."""
    p = _piece_parser("python -m dg_engine.train continue", "train N more minutes from the committed state, then export",
                      STATE_DIR, "runs/embedded", "runs/export")
    args, extra = p.parse_known_args(argv)
    state = read_state(Path(args.state))
    if state is None or "argv" not in state:
        raise SystemExit(f"error: no committed training state in {args.state}; start a run with --save-state")
    print(f"continuing from step {state['step']} ({state['elapsed_s'] / 3600:.1f} h trained)", flush=True)
    main(_piece_argv(state["argv"], args, resume=True) + extra)


def baseline_run(argv: list[str]) -> None:
    """`baseline --minutes N [--like DIR] [--tokens T] [--state DIR]`: a piece of the AR baseline.

    The baseline is trained by this same system on the same data as the run whose state `--like`
    names (its size, corpus, mix and seed), with the next-token objective, until it has processed
    as many tokens as that run (or `--tokens`). Its own state (`--state`) makes it a run in pieces
    like any other: the first piece starts from scratch as the run started (the first `--lr` and
    `--warmup` of its command line), the next ones continue."""
    p = _piece_parser("python -m dg_engine.train baseline",
                      "train the AR baseline N more minutes, on the same data and token budget as a run",
                      AR_STATE_DIR, "runs/ar/run", "runs/ar/model")
    p.add_argument("--like", default=str(STATE_DIR), help="the run whose data and token budget the baseline matches")
    p.add_argument("--tokens", type=int, default=None, help="the token budget (default: the tokens the --like run has seen)")
    args, extra = p.parse_known_args(argv)
    own = read_state(Path(args.state))
    if own is not None and "argv" in own:
        run_argv = own["argv"]
        print(f"continuing the AR baseline from step {own['step']} ({own.get('tokens', 0):,} tokens)", flush=True)
    else:
        like = read_state(Path(args.like))
        if like is None or "argv" not in like:
            raise SystemExit(f"error: no training state in {args.like} to match; pass --like DIR")
        budget = args.tokens or like.get("tokens", 0)
        if budget <= 0:
            raise SystemExit(f"error: the run in {args.like} has seen no tokens; pass --tokens")
        # The token budget ends it, not the run's step count.
        run_argv = _first_values(_drop_options(like["argv"], {"--objective", "--max-tokens", "--steps"}))
        run_argv += ["--objective", "ar", "--max-tokens", str(budget)]
        print(f"starting the AR baseline: {budget:,} tokens, the data of {args.like}", flush=True)
    if args.tokens:
        run_argv = _drop_options(run_argv, {"--max-tokens"}) + ["--max-tokens", str(args.tokens)]
    budget = int(last_value(run_argv, "--max-tokens"))
    if own is not None and own.get("tokens", 0) >= budget:
        print(f"the AR baseline in {args.state} already has its budget ({own['tokens']:,} of {budget:,} "
              "tokens); nothing to train", flush=True)
        return
    main(_piece_argv(run_argv, args, resume=own is not None) + extra)


def _first_values(argv: list[str]) -> list[str]:
    """A command line with each repeated option at its first value (how the run started)."""
    out, seen, i = [], set(), 0
    while i < len(argv):
        a = argv[i]
        takes_value = a.startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("--")
        if a in seen:
            i += 2 if takes_value else 1
            continue
        if a.startswith("--"):
            seen.add(a)
        out += argv[i : i + (2 if takes_value else 1)]
        i += 2 if takes_value else 1
    return out


def _drop_options(argv: list[str], names: set[str]) -> list[str]:
    """The command line without the named options and their values."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in names:
            skip = True
            continue
        out.append(a)
    return out


if __name__ == "__main__":
    main()
