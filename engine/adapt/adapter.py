"""The adapter on disk: what was learned from a workspace, checked before it touches a model.

An adapter is a directory with `adapter.safetensors` and `adapter.json`. Two kinds:

* `full`: the change of every weight of the model, in bf16 (the embedded model is small enough
  that this is a few megabytes; a delta keeps the base weights' own precision where they did not
  move);
* `lora`: low-rank factors `A` [r, in] and `B` [out, r] for chosen linear layers, merged into the
  weights as `W + scale * B @ A` when applied (large checkpoints on a GPU).

The metadata names the base model by a fingerprint of its config and weight files, the workspace
it was trained on (folder and commit), and how (files, tokens, steps, minutes, when). Reading
checks all of it: a missing or unreadable file, a newer format, another base model or tensors that
do not fit raise `AdapterError` with the reason, and the caller keeps serving the base model.
Writing goes to a temporary directory renamed into place, so a run killed at any moment leaves
either the old adapter or the new one, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..errors import ModelLoadError

FORMAT = 1
WEIGHTS, META = "adapter.safetensors", "adapter.json"
FINGERPRINT_BYTES = 1 << 20


class AdapterError(ModelLoadError):
    """An adapter that cannot be used with this model; the message says why."""


@dataclass
class AdapterInfo:
    kind: str  # "full" | "lora"
    base: str  # fingerprint of the base model (see `fingerprint`)
    workspace: str = ""
    commit: str = ""
    files: int = 0
    tokens: int = 0
    steps: int = 0
    minutes: float = 0.0
    created: float = field(default_factory=time.time)
    rank: int = 0
    scale: float = 1.0
    format: int = FORMAT

    def describe(self) -> dict:
        return {**asdict(self), "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(self.created))}


def fingerprint(model_dir: Path) -> str:
    """A cheap identity of a model directory: its config and the head, tail and size of each weight file."""
    model_dir = Path(model_dir)
    h = hashlib.sha256()
    config = model_dir / "config.json"
    h.update(config.read_bytes() if config.is_file() else b"")
    for f in sorted(model_dir.glob("*.safetensors")):
        size = f.stat().st_size
        h.update(f"{f.name}:{size}".encode())
        with open(f, "rb") as fh:
            h.update(fh.read(FINGERPRINT_BYTES))
            fh.seek(max(0, size - FINGERPRINT_BYTES))
            h.update(fh.read(FINGERPRINT_BYTES))
    return h.hexdigest()[:32]


def write(out: Path, tensors: dict[str, torch.Tensor], info: AdapterInfo) -> Path:
    """Write the adapter to `out` atomically (a sibling temporary directory renamed into place)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp / WEIGHTS))
    (tmp / META).write_text(json.dumps(asdict(info), indent=2) + "\n")
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return out


def read_info(path: Path) -> AdapterInfo:
    """The metadata alone (for status displays); `AdapterError` when it cannot be read."""
    try:
        raw = json.loads((Path(path) / META).read_text())
        return AdapterInfo(**{k: raw[k] for k in raw if k in AdapterInfo.__dataclass_fields__})
    except (OSError, json.JSONDecodeError, TypeError) as exc:
        raise AdapterError(f"{Path(path) / META} is not valid adapter metadata: {exc}") from None


def read(path: Path, base: str | None = None) -> tuple[dict[str, torch.Tensor], AdapterInfo]:
    """The adapter's tensors and metadata, or `AdapterError` saying why it cannot be used."""
    path = Path(path)
    if not (path / META).is_file() or not (path / WEIGHTS).is_file():
        raise AdapterError(f"{path} is not an adapter (it needs {META} and {WEIGHTS})")
    info = read_info(path)
    if info.format > FORMAT:
        raise AdapterError(f"{path} has adapter format {info.format}; this dg-lsp reads up to {FORMAT}")
    if info.kind not in ("full", "lora"):
        raise AdapterError(f"{path} has an unknown adapter kind {info.kind!r}")
    if base is not None and info.base != base:
        raise AdapterError(f"{path} was trained on another base model (fingerprint {info.base}, this one is {base})")
    try:
        tensors = load_file(str(path / WEIGHTS))
    except (SafetensorError, OSError, ValueError) as exc:
        raise AdapterError(f"{path / WEIGHTS} cannot be read: {exc}") from None
    return tensors, info


def apply(model, tensors: dict[str, torch.Tensor], info: AdapterInfo) -> int:
    """Put the adapter into `model` in place; returns the number of weights changed.

    Everything is checked before anything is written, so a mismatch leaves the model untouched."""
    # Tied weights (the encoder's and the decoder's layers) answer to every one of their names.
    params = dict(model.named_parameters(remove_duplicate=False))
    if info.kind == "full":
        for name, t in tensors.items():
            if name not in params or params[name].shape != t.shape:
                raise AdapterError(f"the adapter's weight {name} does not fit this model")
        with torch.no_grad():
            for name, t in tensors.items():
                params[name].add_(t.to(params[name].dtype))
        return len(tensors)
    pairs = {}
    for key, a in tensors.items():
        if key.endswith(".lora_A"):
            name = key[: -len(".lora_A")]
            b = tensors.get(f"{name}.lora_B")
            weight = params.get(f"{name}.weight")
            if b is None or weight is None or b.shape[1] != a.shape[0] or weight.shape != (b.shape[0], a.shape[1]):
                raise AdapterError(f"the adapter's low-rank factors for {name} do not fit this model")
            pairs[name] = (weight, a, b)
    with torch.no_grad():
        for weight, a, b in pairs.values():
            weight.add_((info.scale * b.float() @ a.float()).to(weight.dtype))
    return len(pairs)


def load_into(model, path: Path, base: str) -> AdapterInfo:
    """Read the adapter at `path`, check it against the base fingerprint, and apply it."""
    tensors, info = read(path, base)
    apply(model, tensors, info)
    return info
