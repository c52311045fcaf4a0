"""Depth growth: a deeper model that starts as exactly the trained one, to climb off a plateau.

At four layers and width 256 the long run flattened near a held-out loss of 1.90: pieces at the
same peak learning rate ended 1.916, 1.884 and 1.915. Capacity, not tokens, is what such a plateau
asks for, and training a larger model from scratch would throw away about 25 CPU-hours. Growing
keeps them: every layer of the trained model is kept, and each added layer is a copy of its
neighbour whose two residual branches are switched off by zeroing the RMSNorm scales that close
them (`post_attention_layernorm`, `post_feedforward_layernorm`; Gemma's norm multiplies by its
weight). An added layer then passes its input through unchanged, so the grown model computes the
same function, the same loss and the same fills as the one it came from; the zeroed scales still
receive gradients, so training could open the branches, but in practice it does not (below). (Zeroing the
output projections instead would not do: the post-norm of a near-zero branch divides by its tiny
RMS and turns the first small update into a full-size one.)

Closed branches turned out not to open: after 364 steps at a peak of 3e-4 from the fourteenth's
state the added layers' closing scales stood at most 0.016 (mean 0.002) and the held-out loss
tracked the four-layer run's to the third decimal. A copy's output repeats its neighbour's, so the
loss has no use for it, and with the scale at zero none of the copy's own weights learn. `--open S`
starts the added branches at S times their source's scales instead: the grown model is then close
to, not equal to, the trained one, and every added weight learns from the first step. A state
grown closed earlier is opened in place of growing (`--open S` at its own depth).

    python -m dg_engine.train.grow --layers 6 [--open 0.25] [--state engine/train/state] --out runs/state_deep

writes a resume state for `continue --state runs/state_deep`: the grown weights, AdamW's second
moments carried over by name (an added layer takes its source layer's), and the run's command line
with `--layers N` added, so every later piece builds the deeper model.
"""

from __future__ import annotations

import argparse
import json
import shutil
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


def grow_tensors(old: dict[str, torch.Tensor], plan: list[tuple[int, bool]], closers: bool,
                 open_share: float = 0.0) -> dict[str, torch.Tensor]:
    """Tensors by name for the grown model: layers copied by the plan, everything else as it was.
    `closers` scales the branch-closing norms of the added layers (weights, not moments) by
    `open_share`: zero closes the branches."""
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
            scaled = closers and added and rest in BRANCH_CLOSERS
            out[f"{LAYERS}{i}.{rest}"] = tensor * open_share if scaled else tensor.clone()
    return out


def open_state(state_dir: Path, state: dict, open_share: float, out: Path) -> dict:
    """A state grown closed (`grown_from` says from how many layers), its added branches opened to
    `open_share` of the scales of the layers they copied; moments and command line kept."""
    weights = load_file(str(state_dir / WEIGHTS))
    layers = int(last_value(state["argv"], "--layers"))
    plan = layer_sources(state["grown_from"]["layers"], layers)
    for i, (_, added) in enumerate(plan):
        for rest in BRANCH_CLOSERS if added else ():
            # The grown layer before an added one is the trained layer it copies.
            source = weights[f"{LAYERS}{i - 1}.{rest}"]
            weights[f"{LAYERS}{i}.{rest}"] = (source.float() * open_share).to(source.dtype)
    tmp = staging(out)
    tmp.mkdir()
    save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp / WEIGHTS))
    shutil.copyfile(state_dir / OPTIMIZER, tmp / OPTIMIZER)
    opened = {**state, "grown_from": {**state["grown_from"], "opened": {"share": open_share, "step": state["step"]}}}
    (tmp / STATE).write_text(json.dumps(opened, indent=2) + "\n")
    swap_in(tmp, out)
    return opened


def grow_state(state_dir: Path, layers: int, out: Path, open_share: float = 0.0) -> dict:
    """Write the grown resume state into `out` (replacing it); returns its JSON state."""
    state = read_state(state_dir)
    if state is None or "argv" not in state:
        raise GrowError(f"no training state in {state_dir}")
    argv = state["argv"]
    size = last_value(argv, "--size", state["config"]["size"])
    had = last_value(argv, "--layers")
    had = None if had is None else int(had)
    if had == layers and "grown_from" in state:
        if open_share <= 0:
            raise GrowError(f"{state_dir} already has {layers} layers; --open S opens its added branches")
        return open_state(state_dir, state, open_share, out)
    weights = load_file(str(state_dir / WEIGHTS))
    old = build_model(size, weights["model.encoder.language_model.embed_tokens.weight"].shape[0], 0, layers=had)
    new = build_model(size, old.config.text_config.vocab_size, 0, layers=layers)
    plan = layer_sources(old.config.text_config.num_hidden_layers, layers)
    grown = grow_tensors({k: v.float() for k, v in weights.items()}, plan, closers=True, open_share=open_share)
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
                   "grown_from": {"layers": len(set(src for src, _ in plan)), "step": state["step"],
                                  "open_share": open_share}}
    (tmp / STATE).write_text(json.dumps(grown_state, indent=2) + "\n")
    swap_in(tmp, out)
    return grown_state


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m dg_engine.train.grow", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, required=True, help="text layers of the grown model")
    p.add_argument("--state", default=str(STATE_DIR), help="the resume state to grow")
    p.add_argument("--out", required=True, help="where the grown resume state goes")
    p.add_argument("--open", type=float, default=0.0, dest="open_share",
                   help="the added branches' closing scales as this share of their source's (0: closed)")
    args = p.parse_args(argv)
    try:
        state = grow_state(Path(args.state), args.layers, Path(args.out), args.open_share)
    except GrowError as exc:
        sys.exit(f"error: {exc}")
    print(f"grew {args.state} to {args.layers} layers at step {state['step']}: {args.out}")


if __name__ == "__main__":
    main()
