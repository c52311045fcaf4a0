"""Turning the quality benchmark's JSON into what people read: a table, bar charts, training curves.

Kept apart from `quality.py` so that the measuring code and the presentation can change on their
own, and so that the report can be redrawn from a committed `quality.json` without running any
model (`python -m benchmarks.quality_report`). It also summarises the training logs
(`runs/*/log.csv`) that the README cites for how far training got.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

SET_TITLES = {
    "he_single_line": "HumanEval single-line",
    "he_multi_line": "HumanEval multi-line",
    "he_random_span": "HumanEval random-span",
    "heldout_single_line": "held-out stdlib single-line",
    "heldout_multi_line": "held-out stdlib multi-line",
    "heldout_random_span": "held-out stdlib random-span",
}
SYSTEM_TITLES = {
    "embedded_n1": "embedded diffusion, n=1",
    "embedded_n4": "embedded diffusion, n=4 ranked",
    "ar_greedy": "AR baseline, greedy",
    "empty": "empty fill",
    "previous_line": "previous line repeated",
    "canonical": "canonical middle (reference)",
}


def _rows(path: Path) -> list[dict]:
    """The log's rows by step; a resumed run appends steps again, and the later row wins."""
    with path.open(newline="") as handle:
        by_step = {}
        for row in csv.DictReader(handle):
            if _number(row.get("step")) is not None:
                by_step[int(row["step"])] = row
    return [by_step[step] for step in sorted(by_step)]


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def _checkpoint_step(run: Path) -> int | None:
    """The step of the run's latest checkpoint (an export made without training is that step)."""
    try:
        state = json.loads((run / (run / "latest").read_text().strip() / "state.json").read_text())
        return int(state["step"])
    except (OSError, ValueError, KeyError):
        return None


def training_summary(runs: Path) -> dict:
    """How far each training run got: last logged step, time, losses, last and best val_loss."""
    out = {}
    for run in ("embedded", "ar"):
        log = runs / run / "log.csv"
        if not log.is_file():
            out[run] = None
            continue
        rows = _rows(log)
        if not rows:
            out[run] = None
            continue
        last = rows[-1]
        vals = [(int(r["step"]), _number(r.get("val_loss"))) for r in rows if _number(r.get("val_loss")) is not None]
        out[run] = {
            "log": str(log.relative_to(runs.parent)) if runs.parent in log.parents else str(log),
            "last_step": int(last["step"]),
            "elapsed_s": _number(last.get("elapsed_s")),
            "final_loss": _number(last.get("loss")),
            "final_diffusion_loss": _number(last.get("diffusion_loss")),
            "final_ar_loss": _number(last.get("ar_loss")),
            "last_val_loss": {"step": vals[-1][0], "value": vals[-1][1]} if vals else None,
            "best_val_loss": dict(zip(("step", "value"), min(vals, key=lambda v: v[1]))) if vals else None,
            "latest_checkpoint_step": _checkpoint_step(runs / run),
        }
    return out


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def markdown(payload: dict) -> str:
    """One table per metric: systems down, sets across; plus targets and training state."""
    sets = payload["sets"]
    systems = [s for s in SYSTEM_TITLES if any(s in r["systems"] for r in sets.values())]
    lines = ["# Fill quality", ""]
    if payload.get("note"):
        lines += [f"Note: {payload['note']}", ""]
    models = payload.get("models", {})
    for label, info in models.items():
        if info:
            lines.append(f"- {label}: `{info['path']}` ({info['parameters']:,} parameters, weights "
                         f"{info['weights_sha256']}, written {info['weights_mtime']})")
    for label, why in payload.get("problems", {}).items():
        lines.append(f"- {label}: not run ({why})")
    for name, why in payload.get("skipped_sets", {}).items():
        lines.append(f"- {name}: skipped ({why})")
    lines += ["", "Figures are percentages of cases, after the server's post-processing (raw model text in "
              "`quality.json`). Cases per set: "
              + ", ".join(f"{SET_TITLES.get(k, k)} {r['cases']}" for k, r in sets.items()) + ". "
              "The canonical row is the expected middle sent through the same post-processing: its raw text "
              "scores 100 on every metric, so where this row is lower the post-processing itself changed "
              "a correct fill.", ""]
    rerun = payload.get("model_free_rerun")
    if rerun:
        lines[-1:] = [f"The rows {', '.join(rerun['systems'])} were remade on {rerun['date']} at commit "
                      f"{(rerun.get('code') or {}).get('commit', '?')}: {rerun.get('note', '')}", ""]
    for metric, title in (("exact_match", "Exact match"), ("pass_at_1", "pass@1 (HumanEval tests)"),
                          ("edit_similarity", "Edit similarity"), ("syntax_ok", "No new syntax errors")):
        names = [k for k, r in sets.items() if any(metric in s["processed"] for s in r["systems"].values())]
        if not names:
            continue
        lines += [f"## {title}", "", "| system | " + " | ".join(SET_TITLES.get(k, k) for k in names) + " |",
                  "|---|" + "---:|" * len(names)]
        for system in systems:
            cells = [_fmt(sets[k]["systems"].get(system, {}).get("processed", {}).get(metric)) for k in names]
            lines.append(f"| {SYSTEM_TITLES[system]} | " + " | ".join(cells) + " |")
        lines.append("")
    if payload.get("targets"):
        lines += ["## Targets", "", "| target | system | text | value | threshold | met |",
                  "|---|---|---|---:|---:|---|"]
        for t in payload["targets"]:
            lines.append(f"| {t['target']} | {t['system']} | {t['variant']} | {_fmt(t['value'])} | {_fmt(t['threshold'])} | "
                         f"{'yes' if t['met'] else 'no'} |")
        lines.append("")
    for run, info in (payload.get("training") or {}).items():
        if info:
            val = info["last_val_loss"]
            lines.append(f"- training log `runs/{run}` (the run's latest steps, which need not be the model scored above): logged up to step {info['last_step']} after {info['elapsed_s']:.0f} s "
                         f"(latest checkpoint: step {info.get('latest_checkpoint_step')}), train loss "
                         f"{info['final_loss']}, val_loss {val['value'] if val else '–'}"
                         f"{' at step ' + str(val['step']) if val else ''}")
    lines += ["", f"Total time {payload['timing_s']['total']} s on {payload['machine']['cpu_count']} CPU cores."]
    return "\n".join(lines) + "\n"


def bar_chart(payload: dict, metric: str, path: Path) -> bool:
    """Grouped bars: one group per set, one bar per system. False when no set has the metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = {k: r for k, r in payload["sets"].items()
            if any(metric in s["processed"] for s in r["systems"].values())}
    if not sets:
        return False
    systems = [s for s in SYSTEM_TITLES if any(s in r["systems"] for r in sets.values())]
    width = 0.8 / len(systems)
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(sets)), 4.5))
    for i, system in enumerate(systems):
        values = [100 * r["systems"].get(system, {}).get("processed", {}).get(metric, 0) for r in sets.values()]
        xs = [g + (i - (len(systems) - 1) / 2) * width for g in range(len(sets))]
        ax.bar(xs, values, width, label=SYSTEM_TITLES[system])
    ax.set_xticks(range(len(sets)), [SET_TITLES.get(k, k).replace(" ", "\n", 1) for k in sets], fontsize=8)
    ax.set_ylabel(f"{metric.replace('_', ' ')} (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"{metric.replace('_', ' ')} per set ({sum(r['cases'] for r in sets.values())} cases)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _smooth(values: list[float], window: int = 10) -> list[float]:
    return [sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
            for i in range(len(values))]


def training_curve(runs: Path, path: Path) -> bool:
    """Training loss (raw and smoothed) and held-out val_loss against step, one panel per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # A machine that trained has runs/<run>/log.csv; a fresh clone has the copies kept with the results.
    kept = Path(__file__).with_name("results") / "training"
    logs = [(run, next((p for p in (runs / run / "log.csv", kept / f"{run}.csv") if p.is_file()), None))
            for run in ("embedded", "ar")]
    logs = [(run, log) for run, log in logs if log is not None]
    logs = [(run, _rows(log)) for run, log in logs]
    logs = [(run, rows) for run, rows in logs if rows]
    if not logs:
        return False
    fig, axes = plt.subplots(1, len(logs), figsize=(6 * len(logs), 4), squeeze=False)
    for ax, (run, rows) in zip(axes[0], logs):
        steps = [int(r["step"]) for r in rows]
        main = [_number(r["diffusion_loss"]) for r in rows]
        title = "canvas loss (train)" if run == "embedded" else "middle next-token loss (train)"
        ax.plot(steps, main, alpha=0.25, color="C0")
        ax.plot(steps, _smooth(main), color="C0", label=f"{title}, smoothed")
        ax.plot(steps, _smooth([_number(r["loss"]) for r in rows]), color="C2", alpha=0.7, label="total loss, smoothed")
        vals = [(int(r["step"]), _number(r["val_loss"])) for r in rows if _number(r.get("val_loss")) is not None]
        if vals:
            ax.plot(*zip(*vals), "o-", color="C3", label="val_loss (held-out modules)")
        ax.set_title(f"runs/{run} ({'diffusion' if run == 'embedded' else 'autoregressive'}), step {steps[-1]}")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (nats/token)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_all(payload: dict, out: Path, runs: Path, quick: bool = False) -> list[Path]:
    """quality(.quick).md, quality_(quick_)exact_match.png, ..._pass_at_1.png, training_curve.png."""
    tag = "quick_" if quick else ""
    written = [out / f"quality{'.quick' if quick else ''}.md"]
    written[0].write_text(markdown(payload))
    for metric in ("exact_match", "pass_at_1"):
        path = out / f"quality_{tag}{metric}.png"
        if bar_chart(payload, metric, path):
            written.append(path)
    curve = out / f"{tag}training_curve.png"
    if training_curve(runs, curve):
        written.append(curve)
    return written


if __name__ == "__main__":
    results = Path(__file__).with_name("results")
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else results / "quality.json"
    for written in write_all(json.loads(source.read_text()), source.parent, Path(__file__).parent.parent / "runs"):
        print(written)
