"""Token streams: the built corpus tokenized once into a flat array, and read back from the cache."""

import os

import numpy as np
from transformers import AutoTokenizer

from dg_engine.loader import EMBEDDED_DIR
from dg_engine.train.documents import Document, documents_path, write_documents
from dg_engine.train.streams import load_stream, stream_path, tokenize_documents, tokenizer_threads

TEXTS = ["def f(x):\n    return x + 1\n", "import os\nprint(os.sep)\n", "class A:\n    pass\n"]
SEPARATOR = 3


def tokenizer():
    return AutoTokenizer.from_pretrained(EMBEDDED_DIR)


def test_each_document_is_followed_by_the_separator():
    tok = tokenizer()
    docs = [Document("src", f"f{i}.py", t) for i, t in enumerate(TEXTS)]
    stream = tokenize_documents(docs, tok, SEPARATOR)
    expected = []
    for text in TEXTS:
        expected += tok(text, add_special_tokens=False)["input_ids"] + [SEPARATOR]
    assert stream.dtype == np.uint16
    assert stream.tolist() == expected


def test_tokenizer_threads_restore_the_setting(monkeypatch):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    with tokenizer_threads():
        assert os.environ["TOKENIZERS_PARALLELISM"] == "true"
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
    monkeypatch.delenv("TOKENIZERS_PARALLELISM")
    try:
        with tokenizer_threads():
            raise KeyError("inside")
    except KeyError:
        pass
    assert "TOKENIZERS_PARALLELISM" not in os.environ


def test_stream_is_tokenized_once_then_read_from_the_cache(tmp_path):
    tok = tokenizer()
    write_documents(documents_path(tmp_path, "python", "src"), [(f"f{i}.py", t) for i, t in enumerate(TEXTS)])
    said: list[str] = []
    first = load_stream(tok, "python", SEPARATOR, tmp_path, log=said.append)
    assert len(said) == 1 and stream_path(tmp_path, tok, "python").exists()
    again = load_stream(tok, "python", SEPARATOR, tmp_path, log=said.append)
    assert len(said) == 1  # nothing tokenized the second time
    assert again.tolist() == first.tolist() and (first == SEPARATOR).sum() == len(TEXTS)


def test_a_kind_without_documents_has_no_stream(tmp_path):
    assert load_stream(tokenizer(), "prose", SEPARATOR, tmp_path, log=lambda _: None) is None


def test_the_progress_total_comes_from_the_manifest(tmp_path):
    from dg_engine.train.streams import _documents_in_manifest

    assert _documents_in_manifest(tmp_path, "python") is None  # no manifest: a bar without a total
    (tmp_path / "manifest.json").write_text('{"kept_python": 3, "kept_prose": "x"}')
    assert _documents_in_manifest(tmp_path, "python") == 3
    assert _documents_in_manifest(tmp_path, "prose") is None
    (tmp_path / "manifest.json").write_text("{broken")
    assert _documents_in_manifest(tmp_path, "python") is None
