"""The default precision on the CPU: the fastest of fp32, bf16 and int8 where it runs, measured once.

Which one wins depends on the CPU and the model's size, not on a rule that fits every laptop: bf16
matmuls run about three times faster than fp32 on CPUs with AMX, somewhat faster with AVX-512 BF16
and slower without either; PyTorch's dynamic int8 pays a quantization of the activations on every
call, which small layers may not earn back. So with `quantization = "auto"` (the default) and
`dtype = "auto"`, the first load on a machine times one decoder pass of each (the step an inline
fill repeats, over a cached prompt) and keeps the fastest, fp32 unless another is at least 10%
faster; the answer is cached per CPU, torch version, thread count and model, so later loads only
read it. All three give the fp32 model's distributions within the tolerance
`tests/test_precision.py` fixes.

`DG_LSP_PRECISION=float32|bfloat16|int8` pins the choice without measuring.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

ENV = "DG_LSP_PRECISION"
# Each candidate as (name, dtype, quantization).
CANDIDATES = (("float32", "float32", "none"), ("bfloat16", "bfloat16", "none"), ("int8", "float32", "int8"))
TIMED_PASSES = 5
# A reduced precision must beat fp32 by this much to be chosen: fp32 is the exact one, and a few
# percent is within what a busy machine's timings move by.
MARGIN = 0.10
PROMPT_TOKENS = 512


@dataclass(frozen=True)
class Choice:
    name: str  # "float32", "bfloat16" or "int8"
    dtype: str
    quantization: str
    how: str  # "pinned by DG_LSP_PRECISION", "measured", "cached"
    step_ms: dict[str, float]

    def describe(self) -> str:
        timings = ", ".join(f"{k} {v:.1f} ms" for k, v in self.step_ms.items())
        return f"{self.name} ({self.how}{': ' + timings + ' per step' if timings else ''})"


def cache_file() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "dg-lsp" / "precision.json"


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_model() -> str:
    """The CPU's model name, or the platform's word for it where /proc/cpuinfo is missing."""
    for line in _cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AMX or AVX-512 BF16); emulated bf16 is slower."""
    flags = _cpuinfo()
    return "amx_bf16" in flags or "avx512_bf16" in flags


def machine_key(model_dir: Path, threads: int) -> str:
    """What the timings depend on: the CPU, torch, the thread count and the model's shape."""
    cpu = cpu_model()
    shape = hashlib.sha256((model_dir / "config.json").read_bytes()).hexdigest()[:16]
    return f"{cpu}|torch {torch.__version__}|{threads} threads|{shape}"


def step_ms(engine) -> float:
    """Median milliseconds of one decoder pass over a 32-token canvas after a cached prompt."""
    from .kvcache import fork

    prompt = [engine.tokenizer.pad_token_id or 0] * PROMPT_TOKENS
    prefill = engine.prefix_cache.prefill(prompt, reuse=False)
    canvas = torch.randint(0, engine.vocab_size, (1, 32), generator=torch.Generator().manual_seed(0))  # [1, C]
    times = []
    with torch.inference_mode():
        for i in range(TIMED_PASSES + 1):
            cache = fork(prefill.cache, 1)
            started = time.perf_counter()
            engine._decode(canvas, None, cache)
            if i:  # the first pass pays for lazy initialisation
                times.append((time.perf_counter() - started) * 1000)
    return sorted(times)[len(times) // 2]


def measure(config, model_dir: Path) -> dict[str, float]:
    from .engine import load_engine

    out = {}
    for name, dtype, quantization in CANDIDATES:
        engine = load_engine(replace(config, model=str(model_dir), device="cpu", dtype=dtype, quantization=quantization,
                                     adapter=""))
        out[name] = round(step_ms(engine), 2)
    return out


def choose(config, model_dir: Path, measure_fn=measure) -> Choice:
    """The precision for an `auto` load on the CPU: pinned, cached, or measured now and cached."""
    by_name = {name: (dtype, quantization) for name, dtype, quantization in CANDIDATES}
    pinned = os.environ.get(ENV, "")
    if pinned in by_name:
        return Choice(pinned, *by_name[pinned], how=f"pinned by {ENV}", step_ms={})
    if pinned:
        logging.getLogger(__name__).warning("%s=%r is not one of %s; measuring instead", ENV, pinned, ", ".join(by_name))
    key = machine_key(model_dir, config.torch_threads())
    path = cache_file()
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if isinstance(cached.get(key), dict) and set(cached[key]) == set(by_name):
        timings, how = cached[key], "cached"
    else:
        timings, how = measure_fn(config, model_dir), "measured"
        cached[key] = timings
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            staging = path.with_suffix(f".{os.getpid()}.tmp")
            staging.write_text(json.dumps(cached, indent=1))
            staging.replace(path)
        except OSError:
            pass  # A read-only cache costs a measurement per load, nothing else.
    best = min(timings, key=timings.get)
    if timings[best] > (1 - MARGIN) * timings["float32"]:
        best = "float32"
    return Choice(best, *by_name[best], how=how, step_ms=timings)
