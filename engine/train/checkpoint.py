"""Checkpoints and exports in safetensors only: weights, flattened optimizer state, JSON metadata.

Pickle-based `torch.save` files can run code when loaded, and a checkpoint may travel between
machines, so nothing here writes or reads pickle. The optimizer's per-parameter tensors are stored
under flat names (`opt.<index>.<key>`) and rebuilt into AdamW's state dict on load. The step and
seed go to a JSON file; batches and noise are pure functions of (seed, step), so no RNG state is
needed to resume bit-exactly.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

WEIGHTS = "weights.safetensors"
OPTIMIZER = "optimizer.safetensors"
STATE = "state.json"


def _params(model) -> dict[str, torch.Tensor]:
    # named_parameters drops tied duplicates, so each shared tensor is stored once.
    return {name: p.detach().cpu().contiguous() for name, p in model.named_parameters()}


def save_checkpoint(directory: Path, model, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Write the checkpoint of one step into `directory/step_<N>` and point `latest` at it."""
    target = directory / f"step_{state['step']:07d}"
    tmp = directory / f".tmp_step_{state['step']:07d}"
    tmp.mkdir(parents=True, exist_ok=True)
    save_file(_params(model), str(tmp / WEIGHTS))
    flat: dict[str, torch.Tensor] = {}
    for index, per_param in optimizer.state_dict()["state"].items():
        for key, value in per_param.items():
            flat[f"opt.{index}.{key}"] = torch.as_tensor(value).detach().contiguous().cpu()
    save_file(flat, str(tmp / OPTIMIZER))
    (tmp / STATE).write_text(json.dumps(state, indent=2))
    if target.exists():
        for f in target.iterdir():
            f.unlink()
        target.rmdir()
    os.replace(tmp, target)
    (directory / "latest").write_text(target.name)
    _prune(directory, keep=target.name)


def _prune(directory: Path, keep: str) -> None:
    """Keep only the newest checkpoint: they are all resumable and disk is shared."""
    for old in directory.glob("step_*"):
        if old.name != keep:
            for f in old.iterdir():
                f.unlink()
            old.rmdir()


def latest_checkpoint(directory: Path) -> Path | None:
    pointer = directory / "latest"
    if not pointer.exists():
        return None
    path = directory / pointer.read_text().strip()
    return path if (path / STATE).exists() else None


def load_checkpoint(path: Path, model, optimizer: torch.optim.Optimizer) -> dict:
    """Restore weights and optimizer state in place; returns the JSON state."""
    start = (load_file(str(path / WEIGHTS)), load_file(str(path / OPTIMIZER)), json.loads((path / STATE).read_text()))
    return apply_state(start, model, optimizer)


def apply_state(start: tuple[dict, dict, dict], model, optimizer: torch.optim.Optimizer) -> dict:
    """Copy (weights, flat optimizer tensors, JSON state) into the model and optimizer.

    Optimizer tensors stored in bf16 (the committed resume state) come back as fp32."""
    weights, flat, state = start
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(weights[name])
    per_param: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in flat.items():
        _, index, name = key.split(".", 2)
        per_param.setdefault(int(index), {})[name] = value.float() if value.is_floating_point() else value
    current = optimizer.state_dict()
    optimizer.load_state_dict({"state": per_param, "param_groups": current["param_groups"]})
    return state


def export_model(model, tokenizer, directory: Path, generation: dict) -> None:
    """A standard model directory the engine loads with `from_pretrained`, tokenizer included."""
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        DiffusionGemmaGenerationConfig,
        EntropyBoundSamplerConfig,
    )

    from .tokenizer import save_tokenizer

    # Written beside the target and swapped in, so a reader (or a killed run) never sees a model
    # directory with new weights and an old config.
    tmp = staging(directory)
    sampler = EntropyBoundSamplerConfig(entropy_bound=generation["entropy_bound"])
    rest = {k: v for k, v in generation.items() if k != "entropy_bound"}
    model.generation_config = DiffusionGemmaGenerationConfig(sampler_config=sampler, **rest)
    model.save_pretrained(str(tmp), safe_serialization=True)
    save_tokenizer(tokenizer, tmp)
    swap_in(tmp, directory)


def staging(directory: Path) -> Path:
    """An empty folder beside `directory` to write its next version into (`swap_in` then replaces it)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(f".{directory.name}.new")
    shutil.rmtree(tmp, ignore_errors=True)
    return tmp


def swap_in(tmp: Path, directory: Path) -> None:
    """Replace `directory` with the finished `tmp` by renames, so it is never seen half-written."""
    old = directory.with_name(f".{directory.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if directory.exists():
        os.replace(directory, old)
    os.replace(tmp, directory)
    shutil.rmtree(old, ignore_errors=True)


def load_export(directory: Path):
    """(model, tokenizer) of a model directory that `export_model` wrote, in fp32, offline."""
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    model = DiffusionGemmaForBlockDiffusion.from_pretrained(str(directory), dtype=torch.float32, use_safetensors=True,
                                                            local_files_only=True, trust_remote_code=False)
    tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True, trust_remote_code=False)
    return model, tokenizer
