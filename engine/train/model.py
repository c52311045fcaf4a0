"""The embedded model's architecture: a tiny DiffusionGemma sized for CPU infill latency.

The engine serves holes while the user types, so one infill (prefill ~1k tokens, ~10 decoder passes
over a 32-token canvas) must stay well under 100 ms on two CPU threads. This module is the one place
that turns a named size into a `DiffusionGemmaConfig`, so training, export and tests agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, Gemma4VisionConfig


# A logit cap so large that tanh(x / cap) * cap == x to 1e-4 for any logit a model produces;
# training skips the tanh for it (objective.softcapped_logits).
UNCAPPED = 10_000.0


@dataclass(frozen=True)
class ModelSize:
    """The text backbone's shape; everything else is fixed by `build_config`."""

    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    moe_intermediate_size: int
    # Gemma's tanh cap on the output logits. The base size goes without (UNCAPPED: transformers'
    # forward always applies a cap, and one this large bends no logit by more than 1e-4): a model
    # this small rarely reaches logits where 30 bends, and over a 4k vocabulary on every token the
    # tanh, its backward and their fp32 temporaries were a tenth of a training step on the CPU.
    logit_softcap: float = 30.0


SIZES: dict[str, ModelSize] = {
    # Tests only: a few thousand parameters beyond the embedding so a test step takes milliseconds.
    "tiny": ModelSize(64, 2, 2, 1, 32, 128, 32),
    # The shipped CPU model: measured to infill in well under 100 ms at 2 threads.
    "small": ModelSize(192, 3, 3, 1, 64, 512, 96),
    # The block-parallel run's size: the largest whose inline fill (8 decoder passes over a 2k-token
    # cached context) stays near 100 ms on two fp32 cores (engine/train/README.md has the table).
    "base": ModelSize(256, 4, 4, 1, 64, 1024, 128, logit_softcap=UNCAPPED),
    # For a GPU run with more budget; still small enough to serve on a CPU, just slower.
    "large": ModelSize(512, 8, 8, 2, 64, 1536, 256),
}

DEFAULT_CANVAS_LENGTH = 32


# The smallest vision tower the class allows: the architecture requires one, we never use it.
VISION_KWARGS = dict(
    hidden_size=8,
    intermediate_size=8,
    num_hidden_layers=1,
    num_attention_heads=1,
    num_key_value_heads=1,
    head_dim=8,
    patch_size=2,
    position_embedding_size=4,
    pooling_kernel_size=1,
)


def tiny_vision_config() -> Gemma4VisionConfig:
    return Gemma4VisionConfig(**VISION_KWARGS)


def text_kwargs(size: str, vocab_size: int, layers: int | None = None) -> dict:
    """The text-config arguments for a named size and the tokenizer's vocabulary size; `layers`
    deepens it (a model grown from a trained one of that size, `grow.py`)."""
    s = SIZES[size] if layers is None else replace(SIZES[size], num_layers=layers)
    # Every layer is full attention so that the engine can crop the KV cache at any position when it
    # reuses a prompt prefix; a sliding-window layer would have forgotten the cropped-away tokens.
    layer_types = ["full_attention"] * s.num_layers
    rope = {"full_attention": {"rope_type": "default", "rope_theta": 10_000.0}}
    text = dict(
        vocab_size=vocab_size,
        hidden_size=s.hidden_size,
        intermediate_size=s.intermediate_size,
        num_hidden_layers=s.num_layers,
        num_attention_heads=s.num_heads,
        num_key_value_heads=s.num_kv_heads,
        head_dim=s.head_dim,
        global_head_dim=s.head_dim,
        num_global_key_value_heads=s.num_kv_heads,
        layer_types=layer_types,
        rope_parameters=rope,
        max_position_embeddings=8192,
        sliding_window=512,
        # The architecture always runs its MoE branch; two experts with one active is the cheapest form.
        num_experts=2,
        top_k_experts=1,
        moe_intermediate_size=s.moe_intermediate_size,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
        tie_word_embeddings=True,
        final_logit_softcapping=s.logit_softcap,
    )
    return text


def build_config(size: str, vocab_size: int, canvas_length: int = DEFAULT_CANVAS_LENGTH,
                 layers: int | None = None) -> DiffusionGemmaConfig:
    """A DiffusionGemma config for a named size and the tokenizer's vocabulary size."""
    text = text_kwargs(size, vocab_size, layers)
    return DiffusionGemmaConfig(
        text_config=text,
        vision_config=tiny_vision_config().to_dict(),
        canvas_length=canvas_length,
        tie_word_embeddings=True,
        # Image token ids must exist in the vocabulary's range even though no image is ever passed.
        boi_token_id=vocab_size - 1,
        eoi_token_id=vocab_size - 1,
        image_token_id=vocab_size - 1,
    )


def build_model(size: str, vocab_size: int, seed: int, canvas_length: int = DEFAULT_CANVAS_LENGTH,
                layers: int | None = None):
    """A freshly initialised model; the seed makes initialisation reproducible."""
    import torch

    torch.manual_seed(seed)
    config = build_config(size, vocab_size, canvas_length, layers)
    config._attn_implementation = "sdpa"
    model = DiffusionGemmaForBlockDiffusion(config)
    model.tie_weights()
    return model


def count_parameters(model) -> int:
    """Distinct parameters (tied tensors counted once)."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total
