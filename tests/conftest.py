"""Shared fixtures: one tiny random DiffusionGemma per test session, in memory and on disk, and
the small FIM example source the training tests draw from."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The suite's fills run in fp32 wherever it runs, so their outputs do not depend on which precision
# is fastest on the machine; tests/test_precision.py unsets it to test the automatic choice.
os.environ.setdefault("DG_LSP_PRECISION", "float32")

import pytest

from dg_engine import Engine, EngineConfig
from dg_engine.tiny import save_tiny, tiny_model


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the tiny random model; shared, so tests must not mutate it."""
    return tiny_model(seed=0)


@pytest.fixture()
def engine(tiny):
    """A fresh engine (empty prefix cache) around the shared tiny model."""
    model, tokenizer = tiny
    return Engine(model, tokenizer, EngineConfig(), source="tiny")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """The tiny model saved as a standard safetensors model directory."""
    return save_tiny(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def fim_source():
    """(ExampleSource, format) over six standard-library files with a 400-token tokenizer trained
    on them: short prompts and 16-token canvases, so training tests stay fast."""
    import torch

    from dg_engine.prompt import choose_format
    from dg_engine.train.corpus import split
    from dg_engine.train.examples import ExampleConfig, ExampleSource
    from dg_engine.train.tokenizer import train_tokenizer

    torch.set_num_threads(1)
    train, _ = split(limit=6)
    fmt = choose_format(train_tokenizer((f.text for f in train), vocab_size=400))
    return ExampleSource(train, fmt, ExampleConfig(max_prompt_tokens=96, min_prompt_tokens=16, canvas_lengths=(16,))), fmt
