"""The figures of the speed and memory benchmarks, drawn from their result files (matplotlib, Agg).

A distribution says more than a percentile: the latency CDF shows how often typing feels slow,
the decode plot shows where diffusion overtakes the AR baseline as middles grow. Each function
takes one benchmark's parsed JSON and writes one PNG; `write_all` draws whatever results exist.
The quality benchmarks draw their own figures.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def typing_cdf(d: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for run in d["runs"] + (d.get("single_thread_runs") or []):
        values = sorted(run.get("latencies_ms") or [])
        if not values:
            continue
        ys = [(i + 1) / len(values) for i in range(len(values))]
        threads = ", 1-thread server" if run.get("server_threads") == 1 and run in (d.get("single_thread_runs") or []) else ""
        ax.step(values, ys, where="post", label=f"{run['interval_ms']} ms between keystrokes{threads} ({len(values)} answered)")
    t = d.get("targets", {})
    for key, style in (("p50_ms", ":"), ("p95_ms", "--")):
        if key in t:
            ax.axvline(t[key], color="grey", linestyle=style, linewidth=1, label=f"target {key[:3]} {t[key]:.0f} ms")
    ax.set_xscale("log")
    ax.set_xlabel("inline completion latency, answered requests (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(f"Latency while typing ({d.get('model')})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def decode_wall(d: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4))
    lengths = [L["length"] for L in d["lengths"]]
    for key, label in (("diffusion", f"diffusion ({d.get('model')})"), ("ar", f"AR baseline ({d.get('ar_model')})")):
        if not all(key in L for L in d["lengths"]):
            continue
        p50 = [L[key]["wall_ms"]["p50"] for L in d["lengths"]]
        p95 = [L[key]["wall_ms"]["p95"] for L in d["lengths"]]
        ax.errorbar(lengths, p50, yerr=[[0] * len(p50), [b - a for a, b in zip(p50, p95)]], marker="o", capsize=3, label=f"{label}: p50, bar to p95")
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xlabel("middle length (tokens)")
    ax.set_ylabel("wall time per fill (ms)")
    ax.set_title("Decode time against middle length")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def kv_reuse(d: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4))
    contexts = d["contexts"]
    xs = range(len(contexts))
    cold = [c["cold_ms"]["p50"] for c in contexts]
    warm = [c["incremental_ms"]["p50"] for c in contexts]
    ax.bar([x - 0.2 for x in xs], cold, width=0.4, label="cold prefill")
    ax.bar([x + 0.2 for x in xs], warm, width=0.4, label="incremental (a few typed tokens)")
    for x, c in zip(xs, contexts):
        ax.annotate(f"{c['speedup']:.0f}×", (x, max(cold[x], warm[x])), ha="center", va="bottom", fontsize=9)
    ax.set_yscale("log")
    ax.set_xticks(list(xs), [str(c["context_tokens"]) for c in contexts])
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel("prefill time, p50 (ms)")
    ax.set_title(f"Encoder cache reuse ({d.get('model')})")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return _save(fig, path)


def memory(d: dict, path: Path) -> Path:
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4))
    runs = d["runs"]
    names = [f"{r['quantization']} ({r['install']})" if "install" in r else r["quantization"] for r in runs]
    xs = range(len(runs))
    left.bar([x - 0.2 for x in xs], [r["peak_rss_mb"] for r in runs], width=0.4, label="server peak RSS")
    left.bar([x + 0.2 for x in xs], [r["engine_memory_mb"] for r in runs], width=0.4, label="model weights (memoryBytes)")
    target = d.get("targets", {}).get("peak_rss_mb")
    if target:
        left.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.0f} MB")
    left.set_xticks(list(xs), names)
    left.set_ylabel("MB")
    left.set_title("Peak memory")
    left.legend(fontsize=8)
    growth = next((r["growth"] for r in runs if "growth" in r), None)
    if growth:
        done, rss = zip(*growth["samples"])
        right.plot(done, rss, marker=".")
        right.set_xlabel(f"requests after {growth['warmup_requests']} of warm-up")
        right.set_ylabel("RSS (MB)")
        right.set_title(f"RSS over a session ({growth['growth_pct']:+.2f}%)")
        right.grid(alpha=0.3)
    else:
        right.axis("off")
    return _save(fig, path)


PLOTS = {"typing": ("typing_latency_cdf.png", typing_cdf), "decode": ("decode_wall.png", decode_wall),
         "kv_reuse": ("kv_reuse.png", kv_reuse), "memory": ("memory.png", memory)}


def write_all(results: dict[str, dict], out: Path) -> list[Path]:
    written = []
    for name, (filename, draw) in PLOTS.items():
        if name in results:
            written.append(draw(results[name], out / filename))
    return written
