"""The small committed state that lets a long run continue on a fresh clone.

A run's checkpoints live in its run folder, which does not travel. What travels is this state:
the run's weights in fp32 (the shipped model in `engine/embedded` is replaced only when a piece
scores better on held-out code, so the run's own weights are kept apart from it), AdamW's second
moments in bf16, the step (which fixes the data position, since batches are a pure function of
(seed, step)), the tokens and training time so far, and the command line of the run. The first
moments are not kept: with beta1 = 0.9 they are rebuilt within a few dozen steps, and dropping
them keeps the state under 40 MB at the base size (25 MB of weights, 13 MB of moments). A
deeper model (`grow.py`) would not fit so: when fp32 weights and the moments together pass
`STATE_BUDGET`, the weights are kept in bf16 instead, a warm restart whose cost is measured in
`engine/train/README.md` (the held-out loss of the rounded weights against the fp32 ones).
`python -m dg_engine.train continue --minutes N` rebuilds the run from it, trains N more minutes,
exports, and writes the state again, replacing it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .checkpoint import OPTIMIZER, STATE, WEIGHTS, latest_checkpoint

STATE_DIR = Path(__file__).parent / "state"
# The AR baseline's own resume state, beside the embedded model's (`python -m dg_engine.train baseline`).
AR_STATE_DIR = Path(__file__).parent / "ar_state"
# The most a committed state may take, in bytes.
STATE_BUDGET = 40_000_000


class ResumeError(RuntimeError):
    """The committed state does not fit the model it should continue."""


def save_resume(run_dir: Path, state_dir: Path, argv: list[str], budget: int = STATE_BUDGET) -> dict:
    """Write the run's latest checkpoint as the small state into `state_dir`, replacing it; the
    weights in bf16 when in fp32 they and the moments would pass `budget` bytes."""
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None:
        raise ResumeError(f"{run_dir} holds no checkpoint to save")
    flat = load_file(str(ckpt / OPTIMIZER))
    small = {k: v.to(torch.bfloat16) if k.endswith(".exp_avg_sq") else v
             for k, v in flat.items() if not k.endswith(".exp_avg")}
    state = json.loads((ckpt / STATE).read_text())
    state["argv"] = argv
    weights = load_file(str(ckpt / WEIGHTS))
    over = _nbytes(weights) + _nbytes(small) > budget
    state["weights_dtype"] = "bfloat16" if over else "float32"
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=state_dir.parent, prefix=f".{state_dir.name}."))
    if over:
        save_file({k: v.to(torch.bfloat16) for k, v in weights.items()}, str(tmp / WEIGHTS))
    else:
        shutil.copyfile(ckpt / WEIGHTS, tmp / WEIGHTS)
    save_file(small, str(tmp / OPTIMIZER))
    (tmp / STATE).write_text(json.dumps(state, indent=2) + "\n")
    old = state_dir.with_name(state_dir.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if state_dir.exists():
        os.replace(state_dir, old)
    os.replace(tmp, state_dir)
    shutil.rmtree(old, ignore_errors=True)
    return state


def _nbytes(tensors: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


def last_value(argv: list[str], option: str, default: str | None = None) -> str | None:
    """The value the last `option` on a stored command line gives (the one argparse keeps)."""
    return argv[len(argv) - argv[::-1].index(option)] if option in argv else default


def read_state(state_dir: Path) -> dict | None:
    path = state_dir / STATE
    return json.loads(path.read_text()) if path.is_file() else None


def load_resume(state_dir: Path, model) -> tuple[dict, dict, dict]:
    """(weights, optimizer tensors, JSON state) to start `model` from; first moments start at zero."""
    state = read_state(state_dir)
    if state is None:
        raise ResumeError(f"no training state in {state_dir}")
    # Weights kept in bf16 (see `save_resume`) continue as fp32 master weights.
    stored = {k: v.float() for k, v in load_file(str(state_dir / WEIGHTS)).items()}
    for name, p in model.named_parameters():
        w = stored.get(name)
        if w is None or w.shape != p.shape:
            raise ResumeError(f"{state_dir} does not match the run's model ({name}: "
                              f"{None if w is None else tuple(w.shape)} vs {tuple(p.shape)}); "
                              "was it saved by a run of another size?")
    flat = dict(load_file(str(state_dir / OPTIMIZER)))
    for key in [k for k in flat if k.endswith(".exp_avg_sq")]:
        flat[key.removesuffix("_sq")] = torch.zeros_like(flat[key], dtype=torch.float32)
    return stored, flat, state


def _measure_setup(state_dir: Path):
    """(run arguments, held-out source, validation config) of the run a state belongs to."""
    from .__main__ import parse_args
    from .loop import TrainConfig
    from .run import held_out_source, tokenizer_for

    state = read_state(state_dir)
    if state is None or "argv" not in state:
        raise ResumeError(f"no training state in {state_dir}")
    args = parse_args(state["argv"])
    tokenizer = tokenizer_for(args, [])
    source = held_out_source(args, tokenizer)
    if source is None:
        raise ResumeError("the held-out modules are missing, so there is nothing to measure on")
    cfg = TrainConfig(out=args.out, batch_size=args.batch_size, size=args.size, layout=args.layout,
                      objective=args.objective)
    return args, tokenizer, source, cfg


def rounding_cost(state_dir: Path) -> dict[str, float]:
    """The held-out loss (`loop.validate`) of a state's weights as stored and rounded to bf16: what a
    state kept in bf16 costs the run that continues from it."""
    from .loop import validate
    from .model import build_model

    args, tokenizer, source, cfg = _measure_setup(state_dir)
    model = build_model(args.size, len(tokenizer), args.seed, layers=args.layers)
    stored = load_file(str(state_dir / WEIGHTS))
    losses = {}
    for name, dtype in (("stored", None), ("bf16", torch.bfloat16)):
        with torch.no_grad():
            for key, p in model.named_parameters():
                p.copy_(stored[key] if dtype is None else stored[key].to(dtype))
        losses[name] = round(validate(model, source, cfg, "cpu"), 4)
    return {"weights_dtype": str(next(iter(stored.values())).dtype).removeprefix("torch."), **losses}


def model_held_out_loss(state_dir: Path, model_dir: Path) -> float:
    """The held-out loss of an exported model (a piece's end, a mean of ends), measured as the run
    whose state this is measures its own: the same rows, noise and layout as the curve's."""
    from transformers import DiffusionGemmaForBlockDiffusion

    from .loop import validate

    _, _, source, cfg = _measure_setup(state_dir)
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(str(model_dir), dtype=torch.float32)
    return round(validate(model, source, cfg, "cpu"), 4)


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3:
        print(json.dumps({"model": sys.argv[2], "held_out_loss": model_held_out_loss(Path(sys.argv[1]), Path(sys.argv[2]))}))
    elif len(sys.argv) == 2:
        print(json.dumps(rounding_cost(Path(sys.argv[1]))))
    else:
        raise SystemExit("usage: python -m dg_engine.train.resume STATE_DIR [MODEL_DIR]  (held-out loss of the "
                         "state's weights as stored and in bf16, or of an exported model)")
