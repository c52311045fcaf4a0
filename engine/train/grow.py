"""Depth growth: a deeper model that starts as exactly the trained one, to climb off a plateau.

At four layers and width 256 the long run flattened near a held-out loss of 1.90: pieces at the
same peak learning rate ended 1.916, 1.884 and 1.915. Capacity, not tokens, is what such a plateau
asks for, and training a larger model from scratch would throw away about 25 CPU-hours. Growing
keeps them: every layer of the trained model is kept, and each added layer is a copy of its
neighbour whose two residual branches are switched off by zeroing the RMSNorm scales that close
them (`post_attention_layernorm`, `post_feedforward_layernorm`; Gemma's norm multiplies by its
weight). An added layer then passes its input through unchanged, so the grown model computes the
same function, the same loss and the same fills as the one it came from, while the zeroed scales
still receive gradients and open the branches as training finds a use for them. (Zeroing the
output projections instead would not do: the post-norm of a near-zero branch divides by its tiny
RMS and turns the first small update into a full-size one.)

    python -m dg_engine.train.grow --layers 6 [--state engine/train/state] --out runs/state_deep

writes a resume state for `continue --state runs/state_deep`: the grown weights, AdamW's second
moments carried over by name (an added layer takes its source layer's), and the run's command line
with `--layers N` added, so every later piece builds the deeper model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .checkpoint import OPTIMIZER, STATE, WEIGHTS, staging, swap_in
from .loop import optimizer_order
from .model import build_model
from .resume import STATE_DIR, last_value, read_state

LAYERS = "model.encoder.language_model.layers."
# The norms that close a layer's attention and feed-forward branches onto the residual stream.
BRANCH_CLOSERS = ("post_attention_layernorm.weight", "post_feedforward_layernorm.weight")


class GrowError(ValueError):
    pass


def layer_sources(old: int, new: int) -> list[tuple[int, bool]]:
    """For each layer of the grown model: (the trained layer it copies, whether it is an added copy).

    Added layers are spread evenly, each right after the layer it copies: 4 -> 6 gives 0, 0+, 1, 2, 2+, 3."""
    if new < old:
        raise GrowError(f"cannot grow {old} layers into {new}")
    sources = [i * old // new for i in range(new)]
    return [(src, i > 0 and sources[i - 1] == src) for i, src in enumerate(sources)]


def _split(name: str) -> tuple[int, str] | None:
    """(layer index, the rest of the name) for a layer's tensor; None for any other tensor."""
    if not name.startswith(LAYERS):
        return None
    index, rest = name[len(LAYERS):].split(".", 1)
    return int(index), rest


def grow_tensors(old: dict[str, torch.Tensor], plan: list[tuple[int, bool]], closers: bool) -> dict[str, torch.Tensor]:
    """Tensors by name for the grown model: layers copied by the plan, everything else as it was.
    `closers` zeroes the branch-closing norm scales of the added layers (weights, not moments)."""
    by_layer: dict[int, dict[str, torch.Tensor]] = {}
    out: dict[str, torch.Tensor] = {}
    for name, tensor in old.items():
        parts = _split(name)
        if parts is None:
            out[name] = tensor
        else:
            by_layer.setdefault(parts[0], {})[parts[1]] = tensor
    for i, (src, added) in enumerate(plan):
        for rest, tensor in by_layer[src].items():
            off = closers and added and rest in BRANCH_CLOSERS
            out[f"{LAYERS}{i}.{rest}"] = torch.zeros_like(tensor) if off else tensor.clone()
    return out


def grow_state(state_dir: Path, layers: int, out: Path) -> dict:
    """Write the grown resume state into `out` (replacing it); returns its JSON state."""
    state = read_state(state_dir)
    if state is None or "argv" not in state:
        raise GrowError(f"no training state in {state_dir}")
    argv = state["argv"]
    size = last_value(argv, "--size", state["config"]["size"])
    had = last_value(argv, "--layers")
    had = None if had is None else int(had)
    weights = load_file(str(state_dir / WEIGHTS))
    old = build_model(size, weights["model.encoder.language_model.embed_tokens.weight"].shape[0], 0, layers=had)
    new = build_model(size, old.config.text_config.vocab_size, 0, layers=layers)
    plan = layer_sources(old.config.text_config.num_hidden_layers, layers)
    grown = grow_tensors(weights, plan, closers=True)
    missing = [n for n, _ in new.named_parameters() if n not in grown]
    if missing:
        raise GrowError(f"{state_dir} does not hold {missing[0]}; was it saved by a run of size {size}?")
    # Moments by parameter name, then renumbered in the grown model's optimizer order.
    flat = load_file(str(state_dir / OPTIMIZER))
    old_names = [n for n, _ in optimizer_order(old)]
    by_kind: dict[str, dict[str, torch.Tensor]] = {}  # "exp_avg_sq" -> {parameter name: tensor}
    for key, v in flat.items():
        _, index, kind = key.split(".", 2)
        by_kind.setdefault(kind, {})[old_names[int(index)]] = v
    grown_flat = {}
    for kind, tensors in by_kind.items():
        renamed = grow_tensors(tensors, plan, closers=False)
        for index, (name, _) in enumerate(optimizer_order(new)):
            if name in renamed:  # parameters that never had a gradient (the unused vision tower) have no moments
                grown_flat[f"opt.{index}.{kind}"] = renamed[name]
    tmp = staging(out)
    tmp.mkdir()
    save_file({n: grown[n].contiguous() for n, _ in new.named_parameters()}, str(tmp / WEIGHTS))
    save_file({k: v.contiguous() for k, v in grown_flat.items()}, str(tmp / OPTIMIZER))
    grown_state = {**state, "argv": [*argv, "--layers", str(layers)],
                   "grown_from": {"layers": len(set(src for src, _ in plan)), "step": state["step"]}}
    (tmp / STATE).write_text(json.dumps(grown_state, indent=2) + "\n")
    swap_in(tmp, out)
    return grown_state


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m dg_engine.train.grow", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, required=True, help="text layers of the grown model")
    p.add_argument("--state", default=str(STATE_DIR), help="the resume state to grow")
    p.add_argument("--out", required=True, help="where the grown resume state goes")
    args = p.parse_args(argv)
    try:
        state = grow_state(Path(args.state), args.layers, Path(args.out))
    except GrowError as exc:
        sys.exit(f"error: {exc}")
    print(f"grew {args.state} to {args.layers} layers at step {state['step']}: {args.out}")


if __name__ == "__main__":
    main()
