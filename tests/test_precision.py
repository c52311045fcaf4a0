"""bf16 and int8 inference of the shipped model against fp32: the same distributions within a
fixed tolerance, measured on one decoder pass over a real prompt (speed is a benchmark's job)."""

from __future__ import annotations

import pytest
import torch

from dg_engine import EngineConfig, load_engine
from dg_engine.kvcache import fork
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
