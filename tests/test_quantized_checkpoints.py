"""The three ways users bring a quantized model, loaded with `--model DIR` on the CPU.

FP8 and NVFP4 checkpoints are written by compressed-tensors itself from the shipped model's real
weights (`dg_engine.compressed`), the format the released checkpoints use; nf4 is bitsandbytes on
the fly, through its CPU backend. Each must name its format, run a fill, and give the fp32 model's
distributions within the tolerance stated here.
"""

from __future__ import annotations

import json

import pytest
import torch
# The fp32 reference, its prompt and the distributions are test_precision's own fixtures.
from test_precision import distributions, prompt_text, reference  # noqa: F401

from dg_engine import EngineConfig, FillRequest, load_engine
from dg_engine.errors import UnsupportedOptionError
from dg_engine.experts import Nf4Experts
from dg_engine.loader import EMBEDDED_DIR
from dg_engine.quantize import checkpoint_format, quantized_linears

# Total variation distance and top-1 agreement against fp32, on one decoder pass over a real
# prompt. FP8 keeps 3 mantissa bits per weight (measured on the shipped 6.4M model: TV 0.02,
# agreement 0.94); nf4 and NVFP4 keep 16 levels per group of weights (TV 0.09 and 0.07; agreement
# 0.77 and 0.82; NVFP4 leaves the experts dense, nf4 quantizes them too), int8 256 per row (TV
# 0.04). The earlier 2.6M model agreed more under nf4 (0.89).
TOLERANCE = {"fp8": (0.05, 0.9), "nvfp4": (0.15, 0.7), "nf4": (0.15, 0.72)}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from dg_engine.compressed import save_compressed

    root = tmp_path_factory.mktemp("quantized")
    return {kind: save_compressed(EMBEDDED_DIR, root / kind, kind) for kind in ("fp8", "nvfp4")}


def config_for(kind: str, checkpoints) -> EngineConfig:
    if kind == "nf4":
        return EngineConfig(quantization="nf4", device="cpu")
    return EngineConfig(model=str(checkpoints[kind]), device="cpu")


@pytest.mark.parametrize("kind", ["fp8", "nvfp4"])
def test_compressed_checkpoint_declares_its_format(kind, checkpoints):
    config = json.loads((checkpoints[kind] / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "compressed-tensors"
    assert checkpoint_format(config).name == kind


@pytest.mark.parametrize("kind", ["fp8", "nvfp4", "nf4"])
def test_quantized_model_matches_fp32_within_tolerance(kind, checkpoints, reference, prompt_text):
    p = distributions(config_for(kind, checkpoints), prompt_text)
    tv = 0.5 * (p - reference).abs().sum(-1).mean().item()
    agree = (p.argmax(-1) == reference.argmax(-1)).float().mean().item()
    max_tv, min_agree = TOLERANCE[kind]
    assert tv <= max_tv and agree >= min_agree, f"{kind}: TV {tv:.4f}, top-1 agreement {agree:.3f}"
    # Not the fp32 model under another name: the weights did change.
    assert tv > 1e-4


@pytest.mark.parametrize("kind", ["fp8", "nvfp4", "nf4"])
def test_quantized_model_fills_and_says_what_it_runs(kind, checkpoints):
    engine = load_engine(config_for(kind, checkpoints))
    result = engine.fill(FillRequest("def mean(values):\n    total = sum(values)\n    return ", "\n"))
    assert result.candidates and result.candidates[0].steps >= 1
    described = engine.info()["quantization"]
    if kind == "nf4":
        assert described == "nf4"
        quantized, total = quantized_linears(engine.model)
        # Every text linear: transformers' default would skip them all, as they are tied.
        assert quantized == total and total > 10, (quantized, total)
        # And the fused experts, which no linear-layer quantizer sees; one module per tied pair.
        decoder, encoder = engine.model.model.decoder.layers, engine.model.model.encoder.language_model.layers
        assert all(isinstance(d.experts, Nf4Experts) and e.experts is d.experts for d, e in zip(decoder, encoder))
    else:
        assert described == f"{kind} checkpoint (compressed-tensors, decompressed to float32)"


def test_nf4_uses_less_memory_than_fp32():
    full = load_engine(EngineConfig(device="cpu"))
    nf4 = load_engine(EngineConfig(quantization="nf4", device="cpu"))
    assert nf4.memory_bytes < 0.8 * full.memory_bytes


def test_quantizing_a_quantized_checkpoint_is_refused(checkpoints):
    with pytest.raises(UnsupportedOptionError, match=r"already quantized \(fp8, compressed-tensors\)"):
        load_engine(EngineConfig(model=str(checkpoints["fp8"]), device="cpu", quantization="nf4"))


def test_compressed_checkpoint_without_the_library_says_what_to_install(checkpoints, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_compressed_tensors(name, *args, **kwargs):
        if name.startswith("compressed_tensors"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_compressed_tensors)
    with pytest.raises(UnsupportedOptionError, match=r"nvfp4 in the compressed-tensors format.*dg-lsp\[quantized\]"):
        load_engine(EngineConfig(model=str(checkpoints["nvfp4"]), device="cpu"))


def test_fp8_on_the_fly_needs_a_gpu_and_names_the_cpu_routes(tiny_dir):
    with pytest.raises(UnsupportedOptionError, match="needs a CUDA GPU.*int8.*nf4"):
        load_engine(EngineConfig(model=str(tiny_dir), device="cpu", quantization="fp8"))


def test_check_names_the_checkpoint_format(checkpoints):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "dg_lsp", "check", "--model", str(checkpoints["nvfp4"])],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "quantization nvfp4 checkpoint (compressed-tensors, decompressed to float32)" in done.stdout
    assert "UNEXPECTED" not in done.stdout + done.stderr


def test_nf4_experts_compute_what_the_dense_experts_do():
    from transformers.models.diffusion_gemma.modeling_diffusion_gemma import DiffusionGemmaTextExperts

    full = load_engine(EngineConfig(device="cpu", quantization="none"))
    dense = full.model.model.decoder.layers[0].experts
    assert isinstance(dense, DiffusionGemmaTextExperts)
    quantized = Nf4Experts(dense, torch.float32)
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(64, dense.hidden_dim, generator=g)  # [T, H]
    index = torch.randint(0, dense.num_experts, (64, 1), generator=g)  # [T, K]
    weights = torch.rand(64, 1, generator=g)
    with torch.no_grad():
        want, got = dense(hidden, index, weights), quantized(hidden, index, weights)
    relative = ((got - want).norm() / want.norm()).item()
    assert 0 < relative < 0.15, relative  # 4-bit weights: close, not equal
    assert sum(b.numel() * b.element_size() for b in quantized.buffers()) < 0.2 * (
        dense.gate_up_proj.numel() + dense.down_proj.numel()) * 4
