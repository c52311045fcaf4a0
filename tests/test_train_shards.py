"""The packed corpus that travels to a machine without network: a fair sample under a budget."""

from __future__ import annotations

import random

from dg_engine.train.documents import documents_path, iter_documents, write_documents
from dg_engine.train.shards import pack, unpack


def _cache(root, files: int = 300):
    rng = random.Random(0)
    for source in ("alpha", "beta"):
        docs = [(f"pkg/m{i}.py", "".join(rng.choice("abcdefgh \n") for _ in range(3000))) for i in range(files)]
        write_documents(documents_path(root, "python", source), docs)
    write_documents(documents_path(root, "prose", "alpha"), [("README.md", "Some prose.\n")])
    return root


def test_a_pack_fits_its_budget_samples_every_source_and_round_trips(tmp_path):
    cache = _cache(tmp_path / "cache")
    budget = 400_000  # well under the ~1.2 MB the corpus compresses to
    stats = pack(tmp_path / "c.jsonl.xz", cache, max_bytes=budget, log=lambda *_: None)
    assert (tmp_path / "c.jsonl.xz").stat().st_size <= budget and 0 < stats["share"] < 1
    unpack(tmp_path / "c.jsonl.xz", tmp_path / "out", log=lambda *_: None)
    original = {(d.source, d.path): d.text for d in iter_documents(cache, "python")}
    back = list(iter_documents(tmp_path / "out", "python"))
    assert 0 < len(back) < len(original)
    assert {d.source for d in back} == {"alpha", "beta"}  # a sample of each source, not the first one
    assert all(original[(d.source, d.path)] == d.text for d in back)
    # The same corpus packs to the same file.
    pack(tmp_path / "again.jsonl.xz", cache, max_bytes=budget, log=lambda *_: None)
    assert (tmp_path / "again.jsonl.xz").read_bytes() == (tmp_path / "c.jsonl.xz").read_bytes()


def test_a_small_corpus_travels_whole(tmp_path):
    cache = _cache(tmp_path / "cache", files=5)
    pack(tmp_path / "c.jsonl.xz", cache, log=lambda *_: None)
    unpack(tmp_path / "c.jsonl.xz", tmp_path / "out", log=lambda *_: None)
    assert len(list(iter_documents(tmp_path / "out", "python"))) == 10
    assert [d.text for d in iter_documents(tmp_path / "out", "prose")] == ["Some prose.\n"]
