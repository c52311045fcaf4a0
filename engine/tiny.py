"""A tiny random DiffusionGemma with a real tokenizer, built in memory in about a second.

Tests of the engine, the server and the editors need a model that behaves like the real one in
every way except the quality of its text: same class, same cache, same prompt format, same
special tokens. This module builds one with the training code's own tokenizer and model builders
at their smallest size (no files, no download), and can save it as a standard model directory for
tests that start the server as a separate process.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from .train.model import VISION_KWARGS, text_kwargs

# Plain config arguments of the tiny size, for code that builds variants of it (benchmarks/gpu.py).
TINY_TEXT = text_kwargs("tiny", 512)
TINY_VISION = dict(VISION_KWARGS)


def tiny_tokenizer(vocab_size: int = 512):
    """The embedded model's kind of byte-level BPE, trained on this module's own source."""
    from .train.tokenizer import train_tokenizer

    corpus = inspect.getsource(inspect.getmodule(tiny_tokenizer)).splitlines(keepends=True)
    return train_tokenizer(corpus, vocab_size)


def tiny_model(seed: int = 0, canvas_length: int = 16):
    """(model, tokenizer): a random model in eval mode, deterministic for `seed`."""
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        DiffusionGemmaGenerationConfig,
        EntropyBoundSamplerConfig,
    )

    from .train.model import build_model

    tokenizer = tiny_tokenizer()
    model = build_model("tiny", len(tokenizer), seed, canvas_length).eval()
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


# The turn format of Gemma's instruction-tuned checkpoints: a user turn, then the model's.
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<start_of_turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{{ message['content'] | trim }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def save_tiny_chat(path: str | Path, seed: int = 0) -> Path:
    """A tiny random instruction-tuned model: no FIM sentinels in use, a Gemma-style chat template
    and its turn tokens, and the end of turn among the generation's end tokens."""
    from .train.model import build_model

    path = Path(path)
    model, tokenizer = tiny_model(seed)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]})
    tokenizer.chat_template = GEMMA_CHAT_TEMPLATE
    chat = build_model("tiny", len(tokenizer), seed, 16).eval()
    chat.generation_config = model.generation_config
    chat.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<end_of_turn>")]
    chat.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


# Bumped whenever the tiny model's recipe changes, so a stale copy on disk is never reused.
TINY_VERSION = 2


def cached_tiny_dir() -> Path:
    """The tiny model saved once per user in the temp directory, shared by test and benchmark runs."""
    import os
    import tempfile

    path = Path(tempfile.gettempdir()) / f"dg-lsp-tiny-{os.getuid()}-v{TINY_VERSION}"
    if not (path / "model.safetensors").exists():
        staging = Path(tempfile.mkdtemp(dir=tempfile.gettempdir()))
        save_tiny(staging)
        try:
            staging.rename(path)
        except OSError:
            pass  # Another process saved it first.
    return path
