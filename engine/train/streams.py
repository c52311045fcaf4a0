"""Token streams: the built corpus tokenized once into flat uint16 arrays, cached beside it.

Plain-continuation rows are windows of a stream, so a step slices an array instead of tokenizing
text. Documents are joined with the tokenizer's file separator, as the engine separates files in
a prompt. The arrays are plain `.npy` files (read with `allow_pickle=False`) under
`<corpus cache>/tokens/<tokenizer digest>/<kind>.npy`, so a new tokenizer never reads stale
tokens; the same files are the pre-tokenized shards a GPU machine trains from.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
from tqdm import tqdm

from .documents import Document, default_cache_dir, iter_documents

BATCH_DOCUMENTS = 512


def tokenizer_digest(tokenizer) -> str:
    """A short digest of the tokenizer's vocabulary and merges, which name its streams."""
    text = tokenizer.backend_tokenizer.to_str()
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def stream_path(cache_dir: Path, tokenizer, kind: str) -> Path:
    return cache_dir / "tokens" / tokenizer_digest(tokenizer) / f"{kind}.npy"


@contextlib.contextmanager
def tokenizer_threads() -> Iterator[None]:
    """The tokenizer's own thread pool for the duration (the engine turns it off for the server,
    where requests are small and forks happen; the one-time corpus pass is neither)."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


def tokenize_documents(documents: Iterable[Document], tokenizer, separator: int) -> np.ndarray:
    """One uint16 array: each document's tokens followed by `separator`."""
    if len(tokenizer) > np.iinfo(np.uint16).max:
        raise ValueError("a uint16 stream needs a vocabulary of at most 65,535 tokens")
    backend = tokenizer.backend_tokenizer
    parts: list[np.ndarray] = []
    batch: list[str] = []

    def flush() -> None:
        for enc in backend.encode_batch(batch, add_special_tokens=False):
            parts.append(np.asarray(enc.ids + [separator], dtype=np.uint16))
        batch.clear()

    with tokenizer_threads():
        for doc in documents:
            batch.append(doc.text)
            if len(batch) >= BATCH_DOCUMENTS:
                flush()
        if batch:
            flush()
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint16)


def _save_atomic(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npy")
    os.close(fd)
    try:
        np.save(tmp, array, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _documents_in_manifest(cache: Path, kind: str) -> int | None:
    """How many documents of a kind the built corpus holds (a progress bar's total), if it says."""
    try:
        count = json.loads((cache / "manifest.json").read_text()).get(f"kept_{kind}")
    except (OSError, ValueError):
        return None
    return count if isinstance(count, int) else None


def load_stream(tokenizer, kind: str, separator: int, cache_dir: Path | None = None,
                log=print, progress: bool = False) -> np.ndarray | None:
    """The stream of one kind, tokenized on first use (minutes for the full corpus, with a progress
    bar when asked); None if the corpus has no such documents."""
    cache = default_cache_dir() if cache_dir is None else cache_dir
    path = stream_path(cache, tokenizer, kind)
    if not path.exists():
        try:
            docs = iter_documents(cache, kind)
            first = next(docs)
        except (FileNotFoundError, StopIteration):
            return None
        log(f"tokenizing the {kind} corpus into {path}")

        def all_docs():
            yield first
            yield from docs

        shown = tqdm(all_docs(), total=_documents_in_manifest(cache, kind), unit=" files", disable=not progress,
                     desc=f"tokenizing {kind}", dynamic_ncols=True)
        _save_atomic(path, tokenize_documents(shown, tokenizer, separator))
    return np.load(path, mmap_mode="r", allow_pickle=False)
