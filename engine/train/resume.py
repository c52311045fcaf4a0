"""The small committed state that lets a long run continue on a fresh clone.

A run's checkpoints live in its run folder, which does not travel. What travels is the exported
model (the package's `engine/embedded`, fp32 weights) and this state: AdamW's moments in bf16
(half the size of fp32; the weights themselves stay fp32 in the export), the step (which fixes the
data position, since batches are a pure function of (seed, step)), the training time so far and
the command line of the run. `python -m dg_engine.train continue --minutes N` rebuilds the run
from the two and trains N more minutes, then exports and writes the state again, replacing it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .checkpoint import OPTIMIZER, STATE, latest_checkpoint

STATE_DIR = Path(__file__).parent / "state"


class ResumeError(RuntimeError):
    """The committed state does not fit the model it should continue."""


def save_resume(run_dir: Path, state_dir: Path, argv: list[str]) -> dict:
    """Write the run's latest checkpoint's optimizer (bf16) and JSON state into `state_dir`."""
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None:
        raise ResumeError(f"{run_dir} holds no checkpoint to save")
    flat = load_file(str(ckpt / OPTIMIZER))
    small = {k: (v.to(torch.bfloat16) if v.is_floating_point() and v.ndim > 0 else v) for k, v in flat.items()}
    state = json.loads((ckpt / STATE).read_text())
    state["argv"] = argv
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=state_dir.parent, prefix=f".{state_dir.name}."))
    save_file(small, str(tmp / OPTIMIZER))
    (tmp / STATE).write_text(json.dumps(state, indent=2) + "\n")
    old = state_dir.with_name(state_dir.name + ".old")
    if state_dir.exists():
        os.replace(state_dir, old)
    os.replace(tmp, state_dir)
    shutil.rmtree(old, ignore_errors=True)
    return state


def read_state(state_dir: Path) -> dict | None:
    path = state_dir / STATE
    return json.loads(path.read_text()) if path.is_file() else None


def load_resume(state_dir: Path, model_dir: Path, model) -> tuple[dict, dict, dict]:
    """(weights, optimizer tensors, JSON state) to start `model` from: weights from the export."""
    state = read_state(state_dir)
    if state is None:
        raise ResumeError(f"no training state in {state_dir}")
    weights_file = model_dir / "model.safetensors"
    if not weights_file.is_file():
        raise ResumeError(f"no exported model in {model_dir} to continue")
    from transformers import DiffusionGemmaForBlockDiffusion

    # Loaded through the model class, which ties the shared tensors back to the training names.
    loaded = DiffusionGemmaForBlockDiffusion.from_pretrained(str(model_dir))
    stored = {name: p.detach() for name, p in loaded.named_parameters()}
    weights = {}
    for name, p in model.named_parameters():
        w = stored.get(name)
        if w is None or w.shape != p.shape:
            raise ResumeError(f"{model_dir} does not match the run's model ({name}: "
                              f"{None if w is None else tuple(w.shape)} vs {tuple(p.shape)}); "
                              "was it exported by another run?")
        weights[name] = w
    flat = load_file(str(state_dir / OPTIMIZER))
    return weights, flat, state

