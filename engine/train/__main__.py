"""`python -m dg_engine.train`: train (or resume) the embedded model, optionally export it.

The pipeline is corpus (`corpus.py`, `corpus_build.py`), tokenizer (`tokenizer.py`), examples
(`examples.py` holes, `sequences.py` rows, `streams.py` token streams), objective (`blocks.py`;
the one-canvas `objective.py` is kept to compare against), loop (`loop.py`) and export
(`checkpoint.py`, `resume.py`). Examples::

    # the long run's pieces: block-parallel rows from the built corpus, N minutes each
    python -m dg_engine.train --size base --minutes 140 --out runs/embedded \\
        --export engine/embedded --save-state engine/train/state
    python -m dg_engine.train continue --minutes 140     # the next piece, from the committed state
    # the one-canvas trainer on the standard library, as the first embedded model was trained
    python -m dg_engine.train --layout canvas --corpus stdlib --out runs/old --size small --steps 4000
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from ..prompt import FimFormat
from ..tokens import special_tokens
from .corpus import HELD_OUT, SourceFile, split
from .examples import ExampleConfig, ExampleSource
from .loop import UNBOUNDED_STEPS, StopSignals, TrainConfig, keep_freed_memory, resolve_dtype, train
from .model import SIZES, build_model, count_parameters
from .resume import STATE_DIR, ResumeError, load_resume, read_state, save_resume
from .edits import EditSource
from .sequences import BlockSource, MixConfig
from .tokenizer import load_tokenizer, save_tokenizer, train_tokenizer

EMBEDDED_DIR = Path(__file__).resolve().parents[1] / "embedded"
# Room for the largest middle (two blocks of 64) after a prompt of at least 48 tokens.
MIDDLE_ROOM = 2 * 64
MIN_SEQ_LEN = MIDDLE_ROOM + ExampleConfig.min_prompt_tokens


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
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--objective", choices=("diffusion", "ar"), default="diffusion")
    p.add_argument("--layout", choices=("blocks", "canvas"), default="blocks",
                   help="blocks: every token of a row carries a loss; canvas: one canvas per prompt")
    p.add_argument("--corpus", choices=("built", "stdlib"), default="built",
                   help="built: the corpus cache (python -m dg_engine.train.corpus build); stdlib: the library only")
    p.add_argument("--corpus-cache", default=None, help="the built corpus's folder (default ~/.cache/dg-lsp/corpus)")
    p.add_argument("--size", choices=tuple(SIZES), default="small")
    p.add_argument("--seq-len", type=int, default=MixConfig.seq_len, help="tokens per block-parallel row")
    p.add_argument("--fim-share", type=float, default=MixConfig.fim_share)
    p.add_argument("--prose-share", type=float, default=MixConfig.prose_share)
    p.add_argument("--fim-per-row", type=int, default=MixConfig.fim_per_row, help="FIM holes packed into one row, at most")
    p.add_argument("--middle-weight", type=float, default=MixConfig.middle_weight,
                   help="diffusion-loss weight of a FIM middle's tokens (code tokens weigh 1)")
    p.add_argument("--edit-share", type=float, default=MixConfig.edit_share,
                   help="share of rows that are edit traces (next-edit suggestions)")
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
    p.add_argument("--export", default=None, help="write a model directory here when training ends")
    p.add_argument("--save-state", default=None, help="write the small resume state here when training ends")
    p.add_argument("--resume-state", default=None,
                   help="start from this committed state when --out has no checkpoint")
    p.add_argument("--time-limit", type=float, default=None, help="minutes of training in all pieces together")
    p.add_argument("--save-every", type=int, default=250)
    p.add_argument("--val-every", type=int, default=250)
    p.add_argument("--corpus-limit", type=int, default=None, help="use only the first N files (smoke tests)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
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
    if args.bf16:
        args.dtype = "bf16"
    if args.steps is None:
        args.steps = UNBOUNDED_STEPS if args.minutes else 4000
    if args.schedule is None:
        args.schedule = "piece" if args.minutes else "cosine"
    return args


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def training_files(args) -> tuple[list[SourceFile], Path | None]:
    """The FIM files of the chosen corpus and the built corpus's folder (None for the library)."""
    if args.corpus == "stdlib":
        train_files, _ = split(Path(args.corpus_root) if args.corpus_root else None, args.corpus_limit, args.with_tests)
        return train_files, None
    from .documents import default_cache_dir, iter_documents

    cache = Path(args.corpus_cache) if args.corpus_cache else default_cache_dir()
    try:
        files = [SourceFile(f"{d.source}/{d.path}", d.text) for kind in ("python", "prose")
                 for d in iter_documents(cache, kind)]
    except FileNotFoundError as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.corpus_limit:
        files = files[: args.corpus_limit]
    return files, cache


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "continue":
        return continue_run(argv[1:])
    args = parse_args(argv)
    keep_freed_memory()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    dtype = resolve_dtype(args.dtype, device)
    files, cache = training_files(args)
    _, val_files = split(Path(args.corpus_root) if args.corpus_root else None, args.corpus_limit)
    tok_dir = Path(args.tokenizer) if args.tokenizer else EMBEDDED_DIR
    if not (tok_dir / "tokenizer.json").exists():
        save_tokenizer(train_tokenizer(f.text for f in files), tok_dir)
    tokenizer = load_tokenizer(tok_dir)
    fmt = FimFormat(tokenizer, special_tokens(tokenizer))
    max_prompt = min(args.max_prompt_tokens, args.seq_len - MIDDLE_ROOM) if args.layout == "blocks" else args.max_prompt_tokens
    examples = ExampleConfig(max_prompt_tokens=max_prompt, rename_prob=args.rename_prob)
    fim_source = ExampleSource(files, fmt, examples)
    source = fim_source
    if args.layout == "blocks":
        from .streams import load_stream

        sep = fmt.specials.file_separator
        shown = not args.no_progress
        code = load_stream(tokenizer, "python", sep, cache, progress=shown) if cache else None
        prose = load_stream(tokenizer, "prose", sep, cache, progress=shown) if cache else None
        mix = MixConfig(seq_len=args.seq_len, fim_share=args.fim_share, prose_share=args.prose_share,
                        edit_share=args.edit_share, fim_per_row=args.fim_per_row, middle_weight=args.middle_weight)
        edits = EditSource.from_examples(fim_source) if args.edit_share > 0 else None
        source = BlockSource(fim_source, code, prose, mix, edits)
        print(f"streams: {0 if code is None else len(code):,} code tokens, "
              f"{0 if prose is None else len(prose):,} prose tokens", flush=True)
    # Validation always reads the held-out code as written.
    val_source = ExampleSource(val_files, fmt, replace(examples, rename_prob=0.0)) if val_files else None
    model = build_model(args.size, len(tokenizer), args.seed)
    cfg = TrainConfig(
        out=args.out, steps=args.steps, batch_size=args.batch_size, lr=args.lr, warmup=args.warmup,
        seed=args.seed, objective=args.objective, size=args.size, time_limit_min=args.time_limit,
        save_every=args.save_every, val_every=args.val_every, canvas_draws=args.canvas_draws,
        layout=args.layout, dtype=dtype, schedule=args.schedule, piece_minutes=args.minutes,
    )
    start = None
    if args.resume_state:
        try:
            start = load_resume(Path(args.resume_state), model)
        except ResumeError as exc:
            raise SystemExit(f"error: {exc}") from None
    print(f"{args.size} model: {count_parameters(model):,} parameters, {args.layout} layout, {len(files)} FIM files, "
          f"{len(val_files)} held-out files, device {device}, {dtype}", flush=True)
    with StopSignals(lambda text: print(text, file=sys.stderr, flush=True)) as stop:
        state = train(model, tokenizer, source, val_source, cfg, device, args.export, not args.no_progress,
                      start=start, should_stop=stop)
    if args.save_state:
        save_resume(Path(args.out), Path(args.save_state), [a for a in argv if a != "--no-progress"])
    how = " (stopped by a signal: `continue` goes on from here)" if stop.requested else ""
    print(f"stopped at step {state['step']} after {state['elapsed_s']:.0f} s{how}", flush=True)


def continue_run(argv: list[str]) -> None:
    """`continue --minutes N [--state DIR] [--out RUN] [--export DIR]`: the next piece of the run."""
    p = argparse.ArgumentParser(prog="python -m dg_engine.train continue",
                                description="train N more minutes from the committed state, then export")
    p.add_argument("--minutes", type=float, required=True)
    p.add_argument("--state", default=str(STATE_DIR))
    p.add_argument("--out", default="runs/embedded")
    p.add_argument("--export", default="runs/export", help="the piece's model; copy it to engine/embedded when it scores better")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default=None)
    args, extra = p.parse_known_args(argv)
    state = read_state(Path(args.state))
    if state is None or "argv" not in state:
        raise SystemExit(f"error: no committed training state in {args.state}; start a run with --save-state")
    keep = _drop_options(state["argv"], {"--minutes", "--out", "--export", "--save-state", "--resume-state",
                                         "--threads", "--device"})
    more = ["--minutes", str(args.minutes), "--out", args.out, "--export", args.export,
            "--save-state", args.state, "--resume-state", args.state]
    if args.threads:
        more += ["--threads", str(args.threads)]
    if args.device:
        more += ["--device", args.device]
    print(f"continuing from step {state['step']} ({state['elapsed_s'] / 3600:.1f} h trained)", flush=True)
    main(keep + more + extra)


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
