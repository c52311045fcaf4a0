"""Build the proofreading lexicon (`engine/lexicon.txt`) from the corpus's documentation.

The words come from the prose documents the corpus builder kept (the documentation of the
distributions the model trains on; never a held-out module), counted case-insensitively. A word
must occur `min_count` times: documentation has typos of its own, and a typo seen once or twice
must not become a word that hides the same typo in a user's paragraph.

    python -m dg_engine.train.lexicon [--cache DIR] [--min-count 3] [--out engine/lexicon.txt]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Iterable

from ..lexicon import LEXICON_PATH, render
from ..proofread import WORD
from .documents import iter_documents

MIN_COUNT = 3
MAX_WORD = 24


def count_words(texts: Iterable[str]) -> Counter:
    counts: Counter = Counter()
    for text in texts:
        # Proofreading's own notion of a word, so that what it looks up is what was counted.
        counts.update(w.lower() for w in WORD.findall(text) if len(w) <= MAX_WORD)
    return counts


def build(cache: Path | None, min_count: int = MIN_COUNT) -> dict[str, int]:
    counts = count_words(doc.text for doc in iter_documents(cache, "prose"))
    return {w: c for w, c in counts.items() if c >= min_count}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", type=Path, default=None, help="the corpus cache (default: the user's cache)")
    p.add_argument("--min-count", type=int, default=MIN_COUNT)
    p.add_argument("--out", type=Path, default=LEXICON_PATH)
    args = p.parse_args(argv)
    try:
        words = build(args.cache, max(1, args.min_count))
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 1
    args.out.write_text(render(words), encoding="utf-8")
    print(f"wrote {len(words):,} words to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
