"""A tiny random DiffusionGemma with a real tokenizer, built in memory in about a second.

Tests of the engine, the server and the editors need a model that behaves like the real one in
every way except the quality of its text: same class, same cache, same prompt format, same
special tokens. This module builds one from a config (no files, no download), and can save it as
a standard model directory for tests that start the server as a separate process.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import torch

from .tokens import EMBEDDED_SPECIAL_TOKENS

TINY_TEXT = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    global_head_dim=32,
    num_experts=2,
    top_k_experts=1,
    moe_intermediate_size=32,
    sliding_window=128,
    layer_types=["full_attention", "full_attention"],
    max_position_embeddings=16384,
)
TINY_VISION = dict(
    hidden_size=8,
    intermediate_size=8,
    num_hidden_layers=1,
    num_attention_heads=1,
    num_key_value_heads=1,
    head_dim=8,
    position_embedding_size=4,
    patch_size=2,
)


def tiny_tokenizer(vocab_size: int = 512):
    """A byte-level BPE with the embedded model's special tokens, trained on this module's source."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(EMBEDDED_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = inspect.getsource(inspect.getmodule(tiny_tokenizer)).splitlines(keepends=True)
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        additional_special_tokens=list(EMBEDDED_SPECIAL_TOKENS[3:]),
    )


def tiny_config(vocab_size: int, canvas_length: int = 16):
    from transformers import DiffusionGemmaConfig

    specials = {name: i for i, name in enumerate(EMBEDDED_SPECIAL_TOKENS)}
    text = dict(TINY_TEXT, vocab_size=vocab_size, pad_token_id=specials["<pad>"], eos_token_id=specials["<eos>"], bos_token_id=specials["<bos>"])
    return DiffusionGemmaConfig(text_config=text, vision_config=TINY_VISION, canvas_length=canvas_length)


def tiny_model(seed: int = 0, canvas_length: int = 16):
    """(model, tokenizer): a random model in eval mode, deterministic for `seed`."""
    from transformers import DiffusionGemmaForBlockDiffusion
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        DiffusionGemmaGenerationConfig,
        EntropyBoundSamplerConfig,
    )

    tokenizer = tiny_tokenizer()
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(tiny_config(len(tokenizer), canvas_length)).eval()
    model.generation_config = DiffusionGemmaGenerationConfig(
        max_denoising_steps=8,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=0.5),
        t_min=0.4,
        t_max=0.8,
        stability_threshold=1,
        confidence_threshold=0.005,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model, tokenizer


def save_tiny(path: str | Path, seed: int = 0, canvas_length: int = 16) -> Path:
    """Write a tiny random model as a standard safetensors model directory."""
    path = Path(path)
    model, tokenizer = tiny_model(seed, canvas_length)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path
