"""bf16 and int8 inference of the shipped model against fp32: the same distributions within a
fixed tolerance, measured on one decoder pass over a real prompt (speed is a benchmark's job);
and the automatic choice among the three (`dg_engine.precision`)."""

from __future__ import annotations

import json

import pytest
import torch

from dg_engine import EngineConfig, load_engine
from dg_engine.kvcache import fork
from dg_engine.loader import EMBEDDED_DIR
from dg_engine.train.corpus import read_sources

# Total variation distance between the per-position token distributions, and the share of
# positions whose most likely token is the same. bf16 rounds activations; int8 also rounds weights.
TOLERANCE = {"bfloat16": (0.02, 0.95), "int8": (0.12, 0.75)}


def distributions(config: EngineConfig, prompt_text: str) -> torch.Tensor:
    engine = load_engine(config)
    prompt = engine.format.infill_ids(prompt_text, "\n\ndef helper():\n    pass\n")
    prefill = engine.prefix_cache.prefill(prompt, reuse=False)
    canvas = torch.randint(0, engine.vocab_size, (4, 32), generator=torch.Generator().manual_seed(0))  # [N, C]
    with torch.inference_mode():
        logits = engine._decode(canvas, None, fork(prefill.cache, 4)).float()  # [N, C, V]
    return torch.softmax(logits, -1)


@pytest.fixture(scope="module")
def prompt_text() -> str:
    return read_sources(["textwrap.py"])[0].text[:3000]


@pytest.fixture(scope="module")
def reference(prompt_text) -> torch.Tensor:
    return distributions(EngineConfig(dtype="float32"), prompt_text)


@pytest.mark.parametrize("variant", ["bfloat16", "int8"])
def test_reduced_precision_matches_fp32_within_tolerance(variant, reference, prompt_text):
    config = EngineConfig(quantization="int8") if variant == "int8" else EngineConfig(dtype=variant)
    p = distributions(config, prompt_text)
    tv = 0.5 * (p - reference).abs().sum(-1).mean().item()
    agree = (p.argmax(-1) == reference.argmax(-1)).float().mean().item()
    max_tv, min_agree = TOLERANCE[variant]
    assert tv <= max_tv and agree >= min_agree, f"{variant}: TV {tv:.4f}, top-1 agreement {agree:.3f}"


def test_auto_precision_measures_once_then_reads_the_cache(tmp_path, monkeypatch):
    from dg_engine import precision

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(precision.ENV, raising=False)
    calls = []

    def fake_measure(config, model_dir):
        calls.append(model_dir)
        return {"float32": 9.0, "bfloat16": 4.0, "int8": 6.0}

    first = precision.choose(EngineConfig(), EMBEDDED_DIR, fake_measure)
    again = precision.choose(EngineConfig(), EMBEDDED_DIR, fake_measure)
    assert (first.name, first.dtype, first.quantization, first.how) == ("bfloat16", "bfloat16", "none", "measured")
    assert (again.name, again.how) == ("bfloat16", "cached") and len(calls) == 1
    # Another thread count is another machine as far as the timings go.
    other = precision.choose(EngineConfig(threads=7), EMBEDDED_DIR, fake_measure)
    assert other.how == "measured" and len(calls) == 2
    monkeypatch.setenv(precision.ENV, "int8")
    assert precision.choose(EngineConfig(), EMBEDDED_DIR, fake_measure).quantization == "int8"
    monkeypatch.setenv(precision.ENV, "fp64")  # not a choice: measured (here, read from the cache) instead
    assert precision.choose(EngineConfig(), EMBEDDED_DIR, fake_measure).name == "bfloat16"
    # A few percent faster is not faster: fp32 stays.
    close = precision.choose(EngineConfig(threads=3), EMBEDDED_DIR, lambda c, d: {"float32": 9.1, "bfloat16": 12.2, "int8": 8.9})
    assert close.name == "float32"


def test_auto_precision_loads_the_fastest_measured(tiny_dir, tmp_path, monkeypatch):
    from dg_engine import precision

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(precision.ENV, raising=False)
    engine = load_engine(EngineConfig(model=str(tiny_dir), device="cpu"))
    (timings,) = json.loads(precision.cache_file().read_text()).values()
    fastest = min(timings, key=timings.get)
    if timings[fastest] > (1 - precision.MARGIN) * timings["float32"]:
        fastest = "float32"
    assert set(timings) == {"float32", "bfloat16", "int8"} and all(v > 0 for v in timings.values())
    assert engine.info()["precision"].startswith(f"{fastest} (measured")
    expected = {"float32": ("float32", "none"), "bfloat16": ("bfloat16", "none"), "int8": ("float32", "int8")}[fastest]
    assert (engine.info()["dtype"], engine.info()["quantization"]) == expected
    # Asked for explicitly, a dtype or a quantization is never second-guessed.
    assert load_engine(EngineConfig(model=str(tiny_dir), dtype="float32")).info()["precision"] is None


def test_int8_reports_the_same_parameter_count_as_fp32():
    # int8 weights are packed outside `parameters()`, and the tied head's int8 copy is the
    # embedding table again: status and `dg-lsp check` must still name the model's real size.
    fp32 = load_engine(EngineConfig(quantization="none"))
    int8 = load_engine(EngineConfig(quantization="int8"))
    assert int8.parameters == fp32.parameters
    assert int8.info()["parameters"] == fp32.info()["parameters"] > 2_000_000


def test_the_cpu_facts_come_from_cpuinfo(monkeypatch):
    """The CPU's name keys the cached choice and the bf16 flags pick the trainer's dtype; the
    benchmarks record both, since their timings depend on them."""
    from dg_engine import precision

    amx = "processor\t: 0\nmodel name\t: Example CPU 9000\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile\n"
    plain = "processor\t: 0\nmodel name\t: Older CPU\nflags\t\t: fpu sse avx2 avx512f\n"
    monkeypatch.setattr(precision, "_cpuinfo", lambda: amx)
    assert precision.cpu_model() == "Example CPU 9000" and precision.cpu_has_bf16()
    monkeypatch.setattr(precision, "_cpuinfo", lambda: plain)
    assert precision.cpu_model() == "Older CPU" and not precision.cpu_has_bf16()
    monkeypatch.setattr(precision, "_cpuinfo", lambda: "")
    assert precision.cpu_model() and not precision.cpu_has_bf16()
