"""One training invocation, as every rank of it runs: data, model, loop, then the resume state.

`python -m dg_engine.train` parses the command line (`__main__.py`) and hands the options to
`run_piece` once per training process (`parallel.launch`): each process builds the same sources
and model from them, so the ranks need nothing from each other but their gradients. Rank 0 is the
one that talks: it prints, listens for Ctrl-C and SIGTERM, and writes the resume state.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import torch

from ..loader import EMBEDDED_DIR
from ..prompt import FimFormat
from ..tokens import special_tokens
from .corpus import SourceFile, split
from .edits import EditSource
from .examples import ExampleConfig, ExampleSource
from .heap import keep_freed_memory
from .loop import MemoryGuard, StopSignals, TrainConfig, any_of, resolve_dtype, train
from .model import build_model, count_parameters
from .parallel import Ranks, threads_per_rank
from .resume import ResumeError, load_resume, save_resume
from .sequences import BlockSource, MixConfig
from .tokenizer import load_tokenizer, save_tokenizer, train_tokenizer

# Room for the largest middle (two blocks of 64) after a prompt of at least 48 tokens.
MIDDLE_ROOM = 2 * 64
MIN_SEQ_LEN = MIDDLE_ROOM + ExampleConfig.min_prompt_tokens


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


def tokenizer_for(args, files: list[SourceFile]):
    """The run's tokenizer: the shipped model's, or one trained on the files into `--tokenizer`."""
    tok_dir = Path(args.tokenizer) if args.tokenizer else EMBEDDED_DIR
    if not (tok_dir / "tokenizer.json").exists():
        save_tokenizer(train_tokenizer(f.text for f in files), tok_dir)
    return load_tokenizer(tok_dir)


def prepare(args) -> None:
    """Tokenize the corpus streams once, before several ranks start and would all do it."""
    if args.layout != "blocks" or args.corpus != "built":
        return
    from .streams import load_stream

    files, cache = training_files(args)
    tokenizer = tokenizer_for(args, files)
    sep = special_tokens(tokenizer).file_separator
    for kind in ("python", "prose"):
        load_stream(tokenizer, kind, sep, cache, progress=not args.no_progress)


def sources(args, files: list[SourceFile], cache: Path | None, tokenizer, talk: bool):
    """(training source, held-out source) for the layout: block rows or one-canvas holes."""
    fmt = FimFormat(tokenizer, special_tokens(tokenizer))
    examples = ExampleConfig(max_prompt_tokens=max_prompt_tokens(args), rename_prob=args.rename_prob)
    fim_source = ExampleSource(files, fmt, examples)
    source = fim_source
    if args.layout == "blocks":
        from .streams import load_stream

        sep = fmt.specials.file_separator
        shown = talk and not args.no_progress
        code = load_stream(tokenizer, "python", sep, cache, progress=shown) if cache else None
        prose = load_stream(tokenizer, "prose", sep, cache, progress=shown) if cache else None
        mix = MixConfig(seq_len=args.seq_len, fim_share=args.fim_share, prose_share=args.prose_share,
                        edit_share=args.edit_share, fim_per_row=args.fim_per_row, middle_weight=args.middle_weight)
        edits = EditSource.from_examples(fim_source) if args.edit_share > 0 else None
        source = BlockSource(fim_source, code, prose, mix, edits)
        if talk:
            print(f"streams: {0 if code is None else len(code):,} code tokens, "
                  f"{0 if prose is None else len(prose):,} prose tokens", flush=True)
    return source, held_out_source(args, tokenizer)


def held_out_source(args, tokenizer) -> ExampleSource | None:
    """The held-out standard library modules as FIM holes, read as written (no renaming): what
    `loop.validate` measures every run on."""
    fmt = FimFormat(tokenizer, special_tokens(tokenizer))
    _, val_files = split(Path(args.corpus_root) if args.corpus_root else None, args.corpus_limit)
    return ExampleSource(val_files, fmt, ExampleConfig(max_prompt_tokens=max_prompt_tokens(args))) if val_files else None


def max_prompt_tokens(args) -> int:
    # A block row keeps room for the largest middle after the prompt.
    return min(args.max_prompt_tokens, args.seq_len - MIDDLE_ROOM) if args.layout == "blocks" else args.max_prompt_tokens


def run_piece(args, ranks: Ranks = Ranks()) -> dict:
    """Train as the options say, on this rank's share of every batch; rank 0 saves the state."""
    keep_freed_memory()
    device = resolve_device(args.device)
    if device == "cpu" and (args.threads or ranks.world > 1):
        torch.set_num_threads(threads_per_rank(ranks.world, args.threads))
    dtype = resolve_dtype(args.dtype, device)
    files, cache = training_files(args)
    tokenizer = tokenizer_for(args, files)
    source, val_source = sources(args, files, cache, tokenizer, ranks.main)
    model = build_model(args.size, len(tokenizer), args.seed, layers=args.layers)
    cfg = TrainConfig(
        out=args.out, steps=args.steps, batch_size=args.batch_size, lr=args.lr, warmup=args.warmup,
        seed=args.seed, objective=args.objective, size=args.size, time_limit_min=args.time_limit,
        save_every=args.save_every, val_every=args.val_every, canvas_draws=args.canvas_draws,
        aux_weight=args.aux_weight,
        layout=args.layout, dtype=dtype, schedule=args.schedule, piece_minutes=args.minutes, decay_share=args.decay_share,
        max_tokens=args.max_tokens,
    )
    start = None
    if args.resume_state:
        try:
            start = load_resume(Path(args.resume_state), model)
        except ResumeError as exc:
            raise SystemExit(f"error: {exc}") from None
    if ranks.main:
        held_out = 0 if val_source is None else len(val_source.sources)
        shape = args.size if args.layers is None else f"{args.size} ({args.layers} layers)"
        print(f"{shape} model: {count_parameters(model):,} parameters, {args.layout} layout, {len(files)} FIM files, "
              f"{held_out} held-out files, device {device}, {dtype}, {ranks.world} process(es) of "
              f"{torch.get_num_threads()} thread(s)", flush=True)
    def say(text: str) -> None:
        print(f"{text} [rank {ranks.rank}]" if ranks.world > 1 else text, file=sys.stderr, flush=True)

    stop = StopSignals(say) if ranks.main else None
    memory = MemoryGuard(say)
    # The other ranks ignore signals (`parallel.py`) and leave stopping to rank 0; every rank
    # watches the memory, and any rank's stop ends the piece on all of them.
    with stop or contextlib.nullcontext():
        state = train(model, tokenizer, source, val_source, cfg, device, args.export, not args.no_progress,
                      start=start, should_stop=any_of(stop, memory), ranks=ranks)
    if not ranks.main:
        return state
    saved = None
    if args.save_state:
        saved = save_resume(Path(args.out), Path(args.save_state), [a for a in args.argv if a != "--no-progress"])
    how = (" (stopped by a signal: `continue` goes on from here)" if stop.requested else
           " (stopped short of memory: `continue` goes on from here)" if memory.requested else "")
    print(f"stopped at step {state['step']} after {state['elapsed_s']:.0f} s{how}", flush=True)
    if saved is not None and saved["step"] != state["step"]:
        print(f"the resume state is the trunk at step {saved['step']}, where this piece's anneal began; "
              "the annealed weights are the export's", flush=True)
    return state

