"""Exact and near-duplicate removal across the whole corpus, first occurrence kept.

Distributions copy each other (vendored stdlib modules, shared helpers) and themselves (the
transformers library keeps one copied modelling file per model, changed in a few names): trained
on as is, such files are seen many times, which over-weights them and inflates validation
numbers when a copy of validation code sits in training. Exact copies are found by a hash of
the text with blank lines and trailing spaces removed; near copies by MinHash LSH (`datasketch`)
over word 5-shingles, at an estimated Jaccard similarity of 0.8 or more.

The held-out stdlib modules are entered first as references that are never written, so that a
distribution's copy of one (a backport, a vendored `mock.py`) is dropped as well.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

import numpy as np
from datasketch import LeanMinHash, MinHash, MinHashLSH

NUM_PERM = 128
SHINGLE_WORDS = 5
THRESHOLD = 0.8
HELD_OUT_PREFIX = "held-out:"


def normalise(text: str) -> str:
    """The text as exact-duplicate detection sees it: no trailing spaces, no blank lines."""
    lines = (line.rstrip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def digest(text: str) -> str:
    """A stable hash of the normalised text."""
    return hashlib.blake2b(normalise(text).encode("utf-8"), digest_size=16).hexdigest()


def shingles(text: str, width: int = SHINGLE_WORDS) -> set[bytes]:
    """The set of runs of `width` whitespace-separated words (the whole text when it is shorter)."""
    words = text.split()
    if len(words) <= width:
        return {" ".join(words).encode("utf-8")} if words else set()
    return {" ".join(words[i : i + width]).encode("utf-8") for i in range(len(words) - width + 1)}


@dataclass(frozen=True)
class Signature:
    """What dedup needs of a file: its exact hash and its MinHash values (None when it is empty)."""

    digest: str
    minhash: np.ndarray | None
    scheme: str | None = None


def signature(text: str) -> Signature:
    """The file's hash and MinHash. CRC32 hashes the shingles: fast, and the same on every run
    (Python's `hash` is salted per process), which keeps the kept-first order reproducible."""
    grams = shingles(text)
    if not grams:
        return Signature(digest(text), None)
    minhash = MinHash(num_perm=NUM_PERM, hashfunc=zlib.crc32)
    minhash.update_batch(grams)  # a minimum does not depend on order
    return Signature(digest(text), minhash.hashvalues.copy(), getattr(minhash, "scheme", None))


def _lean(sig: Signature) -> LeanMinHash:
    assert sig.minhash is not None
    if sig.scheme is None:  # datasketch < 2 has no schemes
        return LeanMinHash(seed=1, hashvalues=sig.minhash)
    return LeanMinHash(seed=1, hashvalues=sig.minhash, scheme=sig.scheme)


class Deduplicator:
    """Remembers every kept file; `check` says whether a new one repeats one of them.

    Files must be offered in the corpus's fixed order (sources in lock order, paths sorted), so
    that which copy survives does not depend on timing.
    """

    def __init__(self, threshold: float = THRESHOLD) -> None:
        self.threshold = threshold
        self._digests: dict[str, str] = {}
        self._lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
        self._minhashes: dict[str, LeanMinHash] = {}

    def _match(self, sig: Signature) -> tuple[str, str] | None:
        """(kind of duplicate, key of the file it repeats), or None."""
        if sig.digest in self._digests:
            return "exact_duplicate", self._digests[sig.digest]
        if sig.minhash is None:
            return None
        lean = _lean(sig)
        # LSH returns candidates; the estimate from all permutations confirms them, and the
        # sorted order makes the reported original deterministic.
        for key in sorted(self._lsh.query(lean)):
            if self._minhashes[key].jaccard(lean) >= self.threshold:
                return "near_duplicate", key
        return None

    def add(self, key: str, sig: Signature) -> None:
        """Enter a file as kept (or as a held-out reference) without checking it."""
        self._digests.setdefault(sig.digest, key)
        if sig.minhash is not None and key not in self._minhashes:
            lean = _lean(sig)
            self._lsh.insert(key, lean)
            self._minhashes[key] = lean

    def check(self, key: str, sig: Signature) -> str | None:
        """The rule that drops the file (`exact_duplicate`, `near_duplicate`, `held_out_copy`),
        or None, in which case the file is entered as kept."""
        match = self._match(sig)
        if match is None:
            self.add(key, sig)
            return None
        rule, original = match
        return "held_out_copy" if original.startswith(HELD_OUT_PREFIX) else rule
