"""`python -m dg_engine.train`: train (or resume) the embedded model, optionally export it.

Examples::

    python -m dg_engine.train --out runs/embedded --size small --steps 4000 --time-limit 95
    python -m dg_engine.train --out runs/embedded --steps 0 --export engine/embedded   # export only
    python -m dg_engine.train --objective ar --out runs/ar --size small --steps 4000 --export runs/ar/model
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import torch

from ..prompt import FimFormat
from ..tokens import special_tokens
from .corpus import HELD_OUT, split
from .examples import ExampleConfig, ExampleSource
from .loop import TrainConfig, train
from .model import build_model, count_parameters
from .tokenizer import load_tokenizer, save_tokenizer, train_tokenizer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m dg_engine.train", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto")
    p.add_argument("--out", required=True, help="run directory (checkpoints, log.csv); resumed if it has one")
    p.add_argument("--tokenizer", default="runs/tokenizer", help="tokenizer directory; trained there if missing")
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--objective", choices=("diffusion", "ar"), default="diffusion")
    p.add_argument("--size", choices=("tiny", "small", "large"), default="small")
    p.add_argument("--max-prompt-tokens", type=int, default=768)
    p.add_argument("--canvas-draws", type=int, default=1,
                   help="noisy copies of each canvas per prompt, at stratified noise levels (diffusion only)")
    p.add_argument("--rename-prob", type=float, default=0.0,
                   help="share of training examples whose identifiers are renamed consistently (0-1)")
    p.add_argument("--corpus-root", default=None,
                   help="a CPython 3.11 Lib/ folder to read instead of this interpreter's library")
    p.add_argument("--with-tests", action="store_true",
                   help="also train on the library's test suites (never those of held-out modules)")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (weights and optimizer stay fp32)")
    p.add_argument("--export", default=None, help="write a model directory here when training ends")
    p.add_argument("--time-limit", type=float, default=None, help="minutes of training (this invocation included)")
    p.add_argument("--save-every", type=int, default=250)
    p.add_argument("--val-every", type=int, default=250)
    p.add_argument("--corpus-limit", type=int, default=None, help="use only the first N files (smoke tests)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.canvas_draws < 1:
        p.error("--canvas-draws must be at least 1")
    if not 0.0 <= args.rename_prob <= 1.0:
        p.error("--rename-prob must be between 0 and 1")
    if args.corpus_root:
        missing = [name for name in HELD_OUT if not (Path(args.corpus_root) / name).is_file()]
        if missing:
            p.error(f"--corpus-root {args.corpus_root} is not a CPython 3.11 Lib/ folder: no {missing[0]}")
    return args


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    train_files, val_files = split(Path(args.corpus_root) if args.corpus_root else None, args.corpus_limit, args.with_tests)
    tok_dir = Path(args.tokenizer)
    if not (tok_dir / "tokenizer.json").exists():
        save_tokenizer(train_tokenizer(f.text for f in train_files), tok_dir)
    tokenizer = load_tokenizer(tok_dir)
    fmt = FimFormat(tokenizer, special_tokens(tokenizer))
    examples = ExampleConfig(max_prompt_tokens=args.max_prompt_tokens, rename_prob=args.rename_prob)
    train_source = ExampleSource(train_files, fmt, examples)
    # Validation always reads the held-out code as written.
    val_source = ExampleSource(val_files, fmt, replace(examples, rename_prob=0.0)) if val_files else None
    model = build_model(args.size, len(tokenizer), args.seed)
    print(f"{args.size} model: {count_parameters(model):,} parameters, {len(train_files)} training files, "
          f"{len(val_files)} held-out files, device {device}", flush=True)
    cfg = TrainConfig(
        out=args.out, steps=args.steps, batch_size=args.batch_size, lr=args.lr, warmup=args.warmup,
        seed=args.seed, objective=args.objective, size=args.size, time_limit_min=args.time_limit,
        save_every=args.save_every, val_every=args.val_every, canvas_draws=args.canvas_draws, bf16=args.bf16,
    )
    state = train(model, tokenizer, train_source, val_source, cfg, device, args.export, not args.no_progress)
    print(f"stopped at step {state['step']} after {state['elapsed_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
