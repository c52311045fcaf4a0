"""The shipped embedded model: it loads offline from the package and makes obvious fills.

The model is loaded the way a fresh install loads it (`--model embedded`, no network) and used
through the same engine the server runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dg_engine import EngineConfig, load_engine
from dg_engine.loader import EMBEDDED_DIR


@pytest.fixture(scope="module")
def embedded():
    return load_engine(EngineConfig(model="embedded", device="cpu"))


def test_the_shipped_model_is_a_small_standard_directory(embedded):
    names = {p.name for p in Path(EMBEDDED_DIR).iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert (Path(EMBEDDED_DIR) / "model.safetensors").stat().st_size <= 40 * 2**20
    info = embedded.info()
    assert info["format"] == "fim" and info["model"] == "embedded"
    # The model heals prompts, so the vocabulary's texts were decoded at load, not on a first fill.
    assert embedded.defaults.lead_tokens and embedded.healer._texts is not None


def test_the_shipped_model_fills_through_the_server_pipeline(embedded):
    from dg_engine import FillRequest

    result = embedded.fill(FillRequest("def double(value):\n    result = value * 2\n    return ", "\n"))
    best = result.candidates[0]
    assert best.steps >= 1 and len(best.confidences) == len(best.token_ids)
    # The tokenizer round-trips code exactly: what the model writes can be spliced into a buffer.
    code = "def f(x):\n\tif x:\n        return {'a': [1, 2]}  # é 😀\n"
    ids = embedded.tokenizer(code, add_special_tokens=False)["input_ids"]
    assert embedded.tokenizer.decode(ids) == code


@pytest.mark.parametrize("name", ["closing bracket", "return the only variable", "the import the code uses"])
def test_the_shipped_model_makes_the_obvious_fills_it_is_known_for(name):
    # The obvious fills (benchmarks/obvious.py) the shipped model gets, through the server's own
    # pipeline at fp32 with the model's own settings (its head writes the fill's first line).
    # The other two are still measured there, not asserted here. Returning the only variable is
    # right since the head heals the prefix's trailing space (`healing.py`).
    from benchmarks.obvious import CASES, fill_case

    engine = load_engine(EngineConfig(model="embedded", device="cpu", dtype="float32", quantization="none"))
    assert engine.defaults.lead_line and engine.defaults.lead_tokens == 32
    case = next(c for c in CASES if c.name == name)
    assert fill_case(engine, case).strip() == case.want


def test_several_candidates_of_a_line_the_head_ends_are_different_lines(embedded):
    """The head writes the whole line and ends the middle here, so without the beam's other lines
    every candidate would be that one line; the first stays the line a single candidate gets."""
    from dg_engine import FillRequest

    prefix, suffix = "def add(a, b):\n    return ", "\n\n\nprint(add(1, 2))\n"
    one = embedded.fill(FillRequest(prefix, suffix, n=1, max_canvases=1, seed=0)).candidates
    four = embedded.fill(FillRequest(prefix, suffix, n=4, max_canvases=1, seed=0)).candidates
    texts = [c.text.strip() for c in four]
    assert len(one) == 1 and one[0].finished and one[0].lead == len(one[0].token_ids)  # the head's line alone
    assert 2 <= len(four) <= 4 and four[0].text == one[0].text
    assert len(set(texts)) >= 2 and all(c.finished and c.text.strip() for c in four)
    # Ghost text pins the greedy head (`lead_beam` 1) for its latency: no beam, so one line.
    pinned = embedded.fill(FillRequest(prefix, suffix, n=4, max_canvases=1, seed=0, lead_beam=1)).candidates
    assert [c.text for c in pinned] == [one[0].text]
