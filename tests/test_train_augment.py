"""Identifier renaming: consistent across the cut, the language untouched, the code still valid."""

from __future__ import annotations

import ast
import random

from dg_engine.train.augment import IDENTIFIER, KEEP, name_pool, rename
from dg_engine.train.corpus import split
from dg_engine.train.examples import ExampleConfig, ExampleSource
from dg_engine.prompt import choose_format
from dg_engine.train.tokenizer import train_tokenizer

POOL = ["alpha", "beta", "gamma", "delta", "count", "items", "x"]


def test_names_are_renamed_the_same_way_in_every_segment():
    segments = ["class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ",
                "self.y = y",
                "\n\n    def norm(self):\n        return f'{self.x}' + 0x1F + len(y) + 1e5\n"]
    out = rename(segments, POOL, random.Random(0), share=1.0)
    joined = "".join(out)
    ast.parse(joined)
    # Every renameable name changed, to a name that was not in the text, the same way everywhere.
    assert not {"Point", "y", "norm"} & set(IDENTIFIER.findall(joined))
    assert out[1].split(".")[1].split(" = ") == [out[1].split(" = ")[1]] * 2
    # The language stays: keywords, builtins, self, dunders, string prefixes and hex digits.
    for kept in ("class", "def", "return", "self", "__init__", "len", "f'", "0x1F", "1e5"):
        assert kept in joined
    # `x` was in the text, so it cannot be anyone's new name: no two names merge into one.
    assert len(set(IDENTIFIER.findall(joined)) - KEEP - {"__init__"}) == 4


def test_a_name_split_by_the_cut_keeps_its_spelling():
    out = rename(["return val", "ue + other\n"], POOL, random.Random(0), share=1.0)
    assert out[0] == "return val" and out[1].startswith("ue + ") and "other" not in out[1]


def test_renamed_library_code_still_parses():
    files, _ = split(limit=8)
    pool = name_pool(f.text for f in files)
    assert pool and not set(pool) & KEEP
    rng = random.Random(1)
    for f in files:
        text = f.text
        cut = [0, len(text) // 3, 2 * len(text) // 3, len(text)]
        segments = [text[a:b] for a, b in zip(cut, cut[1:])]
        renamed = "".join(rename(segments, pool, rng))
        assert renamed != text
        ast.parse(renamed)


def test_examples_are_renamed_only_when_asked():
    files, _ = split(limit=6)
    fmt = choose_format(train_tokenizer((f.text for f in files), vocab_size=400))
    plain = ExampleSource(files, fmt, ExampleConfig(max_prompt_tokens=128))
    off = ExampleSource(files, fmt, ExampleConfig(max_prompt_tokens=128, rename_prob=0.0))
    on = ExampleSource(files, fmt, ExampleConfig(max_prompt_tokens=128, rename_prob=1.0))
    a, b, c = (s.batch_examples(seed=0, step=3, batch_size=6) for s in (plain, off, on))
    # Off is the default: the same batches, bit for bit, as runs that never heard of renaming.
    assert [e.prompt_ids for e in a] == [e.prompt_ids for e in b]
    assert [e.canvas_ids for e in a] == [e.canvas_ids for e in b]
    assert any(e.prefix + e.middle + e.suffix not in {f.text for f in files} for e in c)
    assert any(x.prompt_ids != y.prompt_ids for x, y in zip(b, c))
