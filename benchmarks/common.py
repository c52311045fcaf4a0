"""What every benchmark shares: machine facts, percentiles, and writing results.

Each result file records the machine (cores, torch version, device), the model and the settings
next to the figures, so that a number in `benchmarks/results/` can always be traced back to what
produced it. Timings are summarised as median, p95 and p99 over repeated runs.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).with_name("results")


def machine() -> dict:
    import torch
    import transformers

    from dg_engine.precision import cpu_has_bf16, cpu_model

    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        # Where bf16 runs in hardware, the engine's default precision and the timings differ.
        "cpu_model": cpu_model(),
        "bf16_hardware": cpu_has_bf16(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(values: list[float]) -> dict:
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "p99": round(percentile(values, 99), 3),
        "mean": round(sum(values) / len(values), 3) if values else 0.0,
    }


def under_load(fn):
    """`fn()` and the load average around it, which says whether its timings had the machine."""
    before = os.getloadavg()
    result = fn()
    return result, {"before": before, "after": os.getloadavg()}


def write(name: str, payload: dict, quick: bool = False) -> Path:
    """Write `results/<name>.json` (or `<name>.quick.json` for quick runs, which are not committed)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / (f"{name}.quick.json" if quick else f"{name}.json")
    payload = {"benchmark": name, "machine": machine(), **payload}
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size of a process, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def rss_parts_bytes(pid: int | str = "self") -> dict[str, int]:
    """RSS split into private memory (RssAnon) and pages of mapped files (RssFile).

    File pages are shared and reclaimable, and how many of them count depends on the page cache:
    a freshly installed torch had 48 MB more of its libraries resident than an older install of
    the same wheel, with identical private memory. The split shows which part moved.
    """
    parts = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":", 1)[0]
        if key in ("RssAnon", "RssFile"):
            parts[key] = int(line.split()[1]) * 1024
    return parts


def peak_rss_bytes(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0
