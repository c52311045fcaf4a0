"""Training examples: every kind decodes back to the original text, through `FimFormat`."""

from __future__ import annotations

import random

import pytest

from dg_engine.prompt import choose_format
from dg_engine.train.corpus import split
from dg_engine.train.examples import KINDS, ExampleConfig, ExampleSource
from dg_engine.train.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def source():
    train, _ = split(limit=12)
    tok = train_tokenizer((f.text for f in train), vocab_size=600)
    return ExampleSource(train, choose_format(tok), ExampleConfig(max_prompt_tokens=256)), train


def _examples_by_kind(src: ExampleSource) -> dict:
    rng = random.Random(1)
    found: dict = {}
    for _ in range(2000):
        e = src.sample(rng, rng.choice((16, 32, 64)))
        found.setdefault(e.kind, []).append(e)
        if len(found) == len(KINDS) and all(len(v) >= 5 for v in found.values()):
            break
    return found


def test_every_kind_round_trips(source):
    src, files = source
    tok, fmt = src.fmt.tokenizer, src.fmt
    texts = [f.text for f in files]
    found = _examples_by_kind(src)
    assert set(found) == set(KINDS)
    end, pad = fmt.specials.end_of_middle, fmt.specials.pad
    for kind, examples in found.items():
        for e in examples:
            # The window is a contiguous piece of one corpus file.
            assert any(e.prefix + e.middle + e.suffix in t for t in texts), kind
            assert e.prompt_ids == fmt.infill_ids(e.prefix, e.suffix, e.chunks, e.middle_so_far)
            # The prompt decodes back to its parts, in the suffix-first order.
            decoded = tok.decode(e.prompt_ids)
            assert decoded.endswith("<fim_prefix>" + e.prefix + "<fim_middle>" + e.middle_so_far)
            assert ("<fim_suffix>" + e.suffix + "<fim_prefix>") in decoded
            # The canvas is the (rest of the) middle, then <fim_end> and padding when it fits.
            canvas = e.canvas_ids
            if end in canvas:
                body = canvas[: canvas.index(end)]
                assert all(t == pad for t in canvas[canvas.index(end) + 1 :])
                assert e.middle_so_far + tok.decode(body) == e.middle
            else:
                assert e.middle[len(e.middle_so_far) :].startswith(tok.decode(canvas))
            if kind == "empty":
                assert e.middle == ""
            if kind == "continuation":
                assert e.suffix == ""
            if kind in ("rest_of_line", "whole_line"):
                assert "\n" not in e.middle


def test_prompt_budget_and_middle_so_far(source):
    src, _ = source
    rng = random.Random(3)
    examples = [src.sample(rng, 32) for _ in range(300)]
    # The budget covers the whole lines around the hole; the hole's own lines, the part of the
    # middle already written and the sentinels come on top, so it is a soft bound.
    assert max(len(e.prompt_ids) for e in examples) <= 256 * 2
    assert sum(len(e.prompt_ids) for e in examples) / len(examples) <= 256
    assert any(e.middle_so_far for e in examples)
    assert any(e.chunks for e in examples)


def test_batches_are_deterministic(source):
    src, _ = source
    a = src.batch_examples(seed=7, step=11, batch_size=4)
    b = src.batch_examples(seed=7, step=11, batch_size=4)
    c = src.batch_examples(seed=7, step=12, batch_size=4)
    assert [e.prompt_ids for e in a] == [e.prompt_ids for e in b]
    assert [e.prompt_ids for e in a] != [e.prompt_ids for e in c]
    assert len({len(e.canvas_ids) for e in a}) == 1


def test_a_line_longer_than_the_budget_is_cut_around_the_hole(source):
    from dataclasses import replace as with_

    from dg_engine.train.corpus import SourceFile

    src, _ = source
    # One enormous line (a change log joined into a paragraph, a data literal): the line windowing
    # keeps the hole's own line whole, which once made a prompt of 9,485 tokens.
    text = "import sys\n\nvalues = [" + ", ".join(str(i * 7919 % 10007) for i in range(4000)) + "]\nprint(values)\n"
    one = ExampleSource([SourceFile("long.py", text)], src.fmt, with_(src.config, max_prompt_tokens=128))
    rng = random.Random(5)
    examples = [one.sample(rng, 32) for _ in range(40)]
    assert max(len(e.prompt_ids) for e in examples) <= 128
    for e in examples:
        # Still one contiguous window of the file, with the hole in it.
        assert e.prefix + e.middle + e.suffix in text
