"""Averaging the weights of several points of one run: a model from the ends of its pieces.

Every piece of the long run ends annealed, at a different point of the same trajectory. Points of
one run lie in one basin, and the mean of their weights is often better than any one of them
(checkpoint averaging; the "model soups" of fine-tuning). It costs no training, so the end of a
piece can be averaged with the shipped model and with the pieces before it, and `score.py`
decides what ships, as for any export.

    python -m dg_engine.train.average SOURCE SOURCE... --out DIR [--weights 1,2]

A SOURCE is an export (a model directory: `model.safetensors`) or a training state (a resume state
or a checkpoint: `weights.safetensors`). The first must be an export: the output is a copy of it
(config, tokenizer, generation and lead settings) with the averaged weights. Sources of another
size are refused by name.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from .checkpoint import WEIGHTS, load_export, staging, swap_in

EXPORT_WEIGHTS = "model.safetensors"


class AverageError(ValueError):
    pass


def stored_weights(source: Path) -> dict[str, torch.Tensor]:
    """The tensors of an export or of a training state, by `named_parameters` name. An export is
    loaded as a model, because its file names a tied weight by another of its modules."""
    if (source / EXPORT_WEIGHTS).is_file():
        model, _ = load_export(source)
        return {name: p.detach() for name, p in model.named_parameters()}
    if (source / WEIGHTS).is_file():
        return load_file(str(source / WEIGHTS))
    raise AverageError(f"{source} holds neither {EXPORT_WEIGHTS} (an export) nor {WEIGHTS} (a training state)")


def parameters_of(source: Path, model) -> dict[str, torch.Tensor]:
    """`source`'s value of each of `model`'s parameters, in fp32; a tied weight is named once, as
    `named_parameters` names it."""
    stored = stored_weights(source)
    out = {}
    for name, p in model.named_parameters():
        w = stored.get(name)
        if w is None or w.shape != p.shape:
            raise AverageError(f"{source} does not match the first model ({name}: "
                               f"{None if w is None else tuple(w.shape)} vs {tuple(p.shape)})")
        out[name] = w.float()
    return out


def mean_weights(models: list[dict[str, torch.Tensor]], weights: list[float]) -> dict[str, torch.Tensor]:
    """The weighted mean, tensor by tensor."""
    total = sum(weights)
    return {name: sum(w / total * m[name] for m, w in zip(models, weights)) for name in models[0]}


def average(sources: list[Path], out: Path, weights: list[float] | None = None) -> None:
    """Write to `out` the first export with the weighted mean of every source's weights."""
    weights = weights or [1.0] * len(sources)
    if len(weights) != len(sources) or min(weights) < 0 or sum(weights) <= 0:
        raise AverageError(f"{len(sources)} sources need as many weights, none negative: {weights}")
    if not (sources[0] / EXPORT_WEIGHTS).is_file():
        raise AverageError(f"the first source must be an export (a model directory): {sources[0]}")
    model, _ = load_export(sources[0])
    mean = mean_weights([parameters_of(s, model) for s in sources], weights)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(mean[name])
    tmp = staging(out)
    shutil.copytree(sources[0], tmp)  # config, tokenizer, generation and lead settings: the first's, as they are
    model.save_pretrained(str(tmp / "weights"), safe_serialization=True)
    (tmp / "weights" / EXPORT_WEIGHTS).replace(tmp / EXPORT_WEIGHTS)
    shutil.rmtree(tmp / "weights")
    swap_in(tmp, out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sources", nargs="+", type=Path, help="exports or training states; the first an export")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--weights", default="", help="comma-separated, one per source (default: equal)")
    args = p.parse_args(argv)
    try:
        weights = [float(w) for w in args.weights.split(",")] if args.weights else None
        average(args.sources, args.out, weights)
    except (AverageError, ValueError, OSError) as exc:
        print(f"average: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: the mean of {len(args.sources)} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
