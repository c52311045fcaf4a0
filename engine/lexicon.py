"""The English words developers' documentation uses, for proofreading prose (`proofread.py`).

A spelling correction needs to know which words exist: a typo is a word the lexicon lacks that lies
one edit (a letter dropped, doubled, swapped or wrong) from one it has. The lexicon is built from
the training corpus's documentation (`python -m dg_engine.train.lexicon`), so it holds the
vocabulary of code documentation ("iterable", "namespace", "kwargs") that a general English word
list marks unknown, and it ships in the package as `lexicon.txt`: one `word count` line per word,
most frequent first.

No spell-checking library is used: the candidate generation is the few lines of `neighbours`, and
the library word lists are general English, where documentation's own words would be typos.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

LEXICON_PATH = Path(__file__).with_name("lexicon.txt")
LETTERS = string.ascii_lowercase


@dataclass(frozen=True)
class Lexicon:
    counts: dict[str, int]

    def known(self, word: str) -> bool:
        return word.lower() in self.counts

    def count(self, word: str) -> int:
        return self.counts.get(word.lower(), 0)

    def neighbours(self, word: str) -> list[str]:
        """Known words one edit from `word` (lower case), the most frequent first."""
        w = word.lower()
        splits = [(w[:i], w[i:]) for i in range(len(w) + 1)]
        edits = {a + b[1:] for a, b in splits if b}
        edits |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
        edits |= {a + c + b for a, b in splits for c in LETTERS}
        edits |= {a + c + b[1:] for a, b in splits if b for c in LETTERS}
        edits.discard(w)
        return sorted((e for e in edits if e in self.counts), key=lambda e: (-self.counts[e], e))


def parse(text: str) -> Lexicon:
    """A lexicon from `word count` lines; malformed lines are skipped."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        word, _, count = line.partition(" ")
        if word.isalpha() and count.isdigit():
            counts[word.lower()] = int(count)
    return Lexicon(counts)


def render(counts: dict[str, int]) -> str:
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return "".join(f"{w} {c}\n" for w, c in rows)


@lru_cache(maxsize=4)
def load(path: Path = LEXICON_PATH) -> Lexicon:
    """The shipped lexicon (read once); an empty one when the file is missing, so proofreading
    then only fixes doubled words and agreement, never typos."""
    try:
        return parse(path.read_text(encoding="utf-8"))
    except OSError:
        return Lexicon({})
