"""The embedded tokenizer: special tokens at fixed ids, exact round-trips, offline loading."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from dg_engine.tokens import EMBEDDED_SPECIAL_TOKENS, special_tokens
from dg_engine.train.corpus import HELD_OUT, list_sources, split
from dg_engine.train.tokenizer import save_tokenizer, train_tokenizer

SAMPLES = [
    "def f(x):\n    return x  # two spaces\n",
    "\tif a:\n\t\tpass\n\n\n",
    "class A:\n    def __init__(self) -> None:\n        self.x = 'héllo ∑ 🙂'\n",
    "   leading spaces and trailing   \n\r\nwindows line\r\n",
    "x=[1,2,3];y={'a':1}\n",
    "",
    " ",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    train, _ = split(limit=8)
    directory = tmp_path_factory.mktemp("tok")
    save_tokenizer(train_tokenizer((f.text for f in train), vocab_size=600), directory)
    return directory, train


def test_special_tokens_have_fixed_ids(saved):
    directory, _ = saved
    tok = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    for expected, name in enumerate(EMBEDDED_SPECIAL_TOKENS):
        assert tok.convert_tokens_to_ids(name) == expected
    s = special_tokens(tok)
    assert (s.pad, s.eos, s.bos) == (0, 1, 2)
    assert s.has_fim and s.file_separator == 7
    assert len(tok) == 600
    assert (directory / "special_tokens_map.json").exists()


@pytest.mark.parametrize("text", SAMPLES)
def test_round_trip_exact(saved, text):
    tok = AutoTokenizer.from_pretrained(str(saved[0]), local_files_only=True)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text


def test_round_trip_whole_files(saved):
    directory, train = saved
    tok = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    for f in train[:4]:
        assert tok.decode(tok(f.text, add_special_tokens=False)["input_ids"]) == f.text


def test_held_out_split_is_fixed_and_disjoint():
    names = list_sources()
    assert all(h in names for h in HELD_OUT)
    assert 0.03 < len(HELD_OUT) / len(names) < 0.08
    train, val = split()
    assert {f.name for f in val} == set(HELD_OUT)
    assert not {f.name for f in train} & set(HELD_OUT)
    assert not any("/test/" in f"/{f.name}" or f.name.startswith("idlelib/") for f in train)
