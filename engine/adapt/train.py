"""Adapting the model to one workspace: the base training's objective on the workspace's own files.

The rows are the base run's (`sequences.BlockSource`): editor-shaped FIM holes and windows of a
code stream, here both cut from the selected workspace files, plus edit traces from them, all
under the block-parallel diffusion loss. The run is the base loop (`loop.train`) with the `piece`
schedule sized to the minutes given, checkpointed in a run directory so that a stopped run
resumes where it was; at its end the adapter is the difference to the base weights:

* `full`: every weight trains; the adapter is the dense delta in bf16;
* `lora`: the base weights stay frozen and each linear layer of the decoder gets a low-rank delta
  `scale * B @ A` (rank `rank`). The encoder and the decoder share their weights, so the delta is
  registered with `torch.nn.utils.parametrize` on both modules of a pair: one pair of factors per
  layer, as the tied weights need. (peft wraps each module on its own, which would give the
  encoder and the decoder different factors for one shared weight.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parametrize

from ..prompt import FimFormat, encode
from ..tokens import special_tokens
from ..train.checkpoint import load_export
from ..train.edits import EditSource
from ..train.examples import ExampleConfig, ExampleSource
from ..train.heap import keep_freed_memory
from ..train.loop import UNBOUNDED_STEPS, TrainConfig, resolve_dtype, train
from ..train.sequences import BlockSource, MixConfig
from . import adapter as store
from .files import Selection

LINEAR_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class AdaptConfig:
    minutes: float = 20.0
    kind: str = "full"  # "full" | "lora"
    lr: float = 0.0  # 0: the kind's default
    rank: int = 16
    batch_size: int = 8
    seq_len: int = 512
    seed: int = 0
    dtype: str = "auto"

    @property
    def learning_rate(self) -> float:
        return self.lr or (3e-4 if self.kind == "full" else 2e-3)


class LowRankDelta(nn.Module):
    """A parametrization: the weight as `W + scale * B @ A`, with `B` starting at zero."""

    def __init__(self, out_features: int, in_features: int, rank: int, scale: float):
        super().__init__()
        self.A = nn.Parameter(torch.randn(rank, in_features) / in_features**0.5)  # [r, in]
        self.B = nn.Parameter(torch.zeros(out_features, rank))  # [out, r]
        self.scale = scale

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight + self.scale * (self.B @ self.A).to(weight.dtype)


def tied_linears(model) -> dict[str, list[nn.Linear]]:
    """The language model's linear layers by their decoder name, each with every module sharing its weight."""
    by_weight: dict[int, list[tuple[str, nn.Linear]]] = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in LINEAR_NAMES and "vision" not in name:
            by_weight.setdefault(module.weight.data_ptr(), []).append((name, module))
    out = {}
    for members in by_weight.values():
        name = next((n for n, _ in members if n.startswith("model.decoder.")), members[0][0])
        out[name] = [m for _, m in members]
    return out


def add_lora(model, rank: int) -> dict[str, LowRankDelta]:
    """Freeze the model and register one low-rank delta per tied linear layer; returns them by name."""
    for p in model.parameters():
        p.requires_grad_(False)
    deltas = {}
    for name, modules in tied_linears(model).items():
        out_f, in_f = modules[0].weight.shape
        delta = LowRankDelta(out_f, in_f, rank, scale=2.0 / rank)
        for module in modules:
            parametrize.register_parametrization(module, "weight", delta)
        deltas[name] = delta
    return deltas


def code_stream(selection: Selection, fmt: FimFormat) -> np.ndarray:
    """The workspace files tokenized into one stream, each after a file separator."""
    sep = fmt.specials.file_separator
    fmt.tokenizer.model_max_length = 1 << 30  # whole files go into a stream, not into the model at once
    ids: list[int] = []
    for f in selection.files:
        ids += [sep, *encode(fmt.tokenizer, f.text)]
    dtype = np.uint16 if len(fmt.tokenizer) < 65536 else np.uint32
    return np.asarray(ids, dtype=dtype)


def load_base(base_dir: Path):
    return load_export(base_dir)


def adapt(base_dir: Path, selection: Selection, out: Path, run_dir: Path, cfg: AdaptConfig = AdaptConfig(),
          workspace: str = "", commit: str = "", progress: bool = True, should_stop=None, on_step=None) -> store.AdapterInfo:
    """Train for `cfg.minutes` (resuming from `run_dir`), then write the adapter to `out`."""
    if not selection.files:
        raise ValueError("no files to learn from")
    keep_freed_memory()
    model, tokenizer = load_base(Path(base_dir))
    base = {n: p.detach().clone() for n, p in model.named_parameters()} if cfg.kind == "full" else None
    deltas = add_lora(model, cfg.rank) if cfg.kind == "lora" else {}
    fmt = FimFormat(tokenizer, special_tokens(tokenizer))
    fim = ExampleSource(selection.files, fmt, ExampleConfig(max_prompt_tokens=cfg.seq_len - 128))
    mix = MixConfig(seq_len=cfg.seq_len, fim_share=0.6, prose_share=0.0, edit_share=0.1)
    source = BlockSource(fim, code_stream(selection, fmt), None, mix, EditSource.from_examples(fim))
    train_cfg = TrainConfig(out=str(run_dir), steps=UNBOUNDED_STEPS, batch_size=cfg.batch_size, lr=cfg.learning_rate, warmup=20,
                            weight_decay=0.0, seed=cfg.seed, size="adapted", save_every=50, val_every=UNBOUNDED_STEPS,
                            layout="blocks", dtype=resolve_dtype(cfg.dtype, "cpu"), schedule="piece",
                            piece_minutes=cfg.minutes)
    started = time.time()
    state = train(model, tokenizer, source, None, train_cfg, progress=progress, should_stop=should_stop, on_step=on_step)
    info = store.AdapterInfo(kind=cfg.kind, base=store.fingerprint(Path(base_dir)), workspace=workspace, commit=commit,
                             files=len(selection.files), tokens=int(state.get("tokens", 0)), steps=int(state["step"]),
                             minutes=round((time.time() - started) / 60, 2), rank=cfg.rank if deltas else 0,
                             scale=2.0 / cfg.rank if deltas else 1.0)
    store.write(out, adapter_tensors(model, base, deltas), info)
    return info


def adapter_tensors(model, base: dict | None, deltas: dict[str, LowRankDelta]) -> dict[str, torch.Tensor]:
    """What the adapter stores: low-rank factors, or the dense delta of every changed weight."""
    if deltas:
        out = {}
        for name, d in deltas.items():
            out[f"{name}.lora_A"] = d.A.detach().float()
            out[f"{name}.lora_B"] = d.B.detach().float()
        return out
    out = {}
    for name, p in model.named_parameters():
        delta = (p.detach() - base[name]).to(torch.bfloat16)
        if bool(delta.any()):
            out[name] = delta
    return out

