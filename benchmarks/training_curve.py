"""The long run's curve: losses against training tokens, and the held-out score of every piece.

Reads the block-parallel run's log (`runs/embedded/log.csv` where it trained, else the copy kept in
`benchmarks/results/training/blocks.csv`) and the pieces' scores
(`benchmarks/results/training/pieces.jsonl`, one row per exported piece, written by
`python -m dg_engine.train.score`). Writes `benchmarks/results/training/blocks_curve.png` and prints
the quality-by-training-tokens table the README shows.

    python -m benchmarks.training_curve [--log PATH]
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

RESULTS = Path(__file__).with_name("results") / "training"
ROOT = Path(__file__).resolve().parents[1]


def read_log(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r.get("step")]


def tokens_axis(rows: list[dict]) -> list[float]:
    """Cumulative tokens at each logged row, from the logged rate and the time between rows."""
    out, total, last_t = [], 0.0, 0.0
    for r in rows:
        t = float(r["elapsed_s"])
        total += float(r["tokens_per_s"]) * max(0.0, t - last_t)
        last_t = t
        out.append(total)
    return out


def table(pieces: list[dict]) -> str:
    lines = ["| model | training tokens | hours | held-out val loss | exact match | edit similarity | steps per fill |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for p in pieces:
        tokens = f"{p['tokens'] / 1e6:.1f}M" if p.get("tokens") else "-"
        hours = f"{p['hours']:.2f}" if p.get("hours") is not None else "-"
        val = f"{p['val_loss']:.3f}" if p.get("val_loss") is not None else "-"
        lines.append(f"| {p.get('note') or p['model']} | {tokens} | {hours} | {val} | {p['exact_match']:.1%} | "
                     f"{p['edit_similarity']:.3f} | {p['mean_steps']:.1f} |")
    return "\n".join(lines)


def plot(rows: list[dict], pieces: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tokens = [t / 1e6 for t in tokens_axis(rows)]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(tokens, [float(r["diffusion_loss"]) for r in rows], alpha=0.6, label="diffusion loss (train, every block)")
    ax.plot(tokens, [float(r["ar_loss"]) for r in rows], alpha=0.6, label="next-token loss (train)")
    vals = [(x, float(r["val_loss"])) for x, r in zip(tokens, rows) if r.get("val_loss")]
    if vals:
        ax.plot(*zip(*vals), "o-", label="held-out canvas loss")
    shipped = next((p for p in pieces if p.get("step") is None and p.get("val_loss")), None)
    if shipped:
        ax.axhline(shipped["val_loss"], ls="--", color="grey", label="held-out loss of the one-canvas model")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("loss (nats/token)")
    ax.set_ylim(top=min(8.0, ax.get_ylim()[1]))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.training_curve", description=__doc__.splitlines()[0])
    p.add_argument("--log", default=None)
    args = p.parse_args(argv)
    log = Path(args.log) if args.log else next(
        (c for c in (ROOT / "runs" / "embedded" / "log.csv", RESULTS / "blocks.csv") if c.is_file()), None)
    if log is None:
        print("no block-parallel training log")
        return 1
    pieces_file = RESULTS / "pieces.jsonl"
    pieces = [json.loads(line) for line in pieces_file.read_text().splitlines() if line.strip()] if pieces_file.exists() else []
    plot(read_log(log), pieces, RESULTS / "blocks_curve.png")
    print(table(pieces))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
