"""Consistent identifier renaming: more distinct training text from a small corpus.

The corpus (the standard library, about 3M tokens) is seen many times over in a CPU run, and the
held-out loss stops falling while the training loss still does: the model learns the library's
names by heart instead of reading them from the context. Renaming a share of one example's
identifiers, every occurrence in the prefix, middle and suffix alike, keeps the code valid and its
structure intact but makes those names impossible to recall from memory, so the model has to copy
them from the context, which is what "return the only variable in scope" or `self.y = y` ask for.

Keywords, builtins, `self`/`cls` and dunder names are never renamed: they are the language, not
the program. A name that a cut splits (part in the prefix, part in the middle) is left alone, so
the pieces still join into the original token on both sides.
"""

from __future__ import annotations

import builtins
import keyword
import random
import re
from collections import Counter
from collections.abc import Iterable

# An identifier that is not part of a number (`0x1F`), a string prefix (`f"..."`, `rb'...'`), an
# escape (`"\n"`), a %-format (`"%d"`) or an f-string conversion or format spec (`{x!r}`, `{x:d}`).
IDENTIFIER = re.compile(r"(?<![!:\\%])\b[A-Za-z_][A-Za-z0-9_]*\b(?!['\"])")
KEEP = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins)) | {"self", "cls"}
# The share of an example's renameable names that get a new one when the example is augmented.
RENAME_SHARE = 0.5


def renameable(name: str) -> bool:
    return name not in KEEP and not (name.startswith("__") and name.endswith("__"))


def name_pool(texts: Iterable[str], min_count: int = 3) -> list[str]:
    """Identifiers used at least `min_count` times in the corpus: replacements that look real."""
    counts = Counter(m.group(0) for text in texts for m in IDENTIFIER.finditer(text))
    return sorted(n for n, c in counts.items() if c >= min_count and renameable(n))


def rename(segments: list[str], pool: list[str], rng: random.Random, share: float = RENAME_SHARE) -> list[str]:
    """The segments with a random `share` of their identifiers renamed consistently across all."""
    joined = "".join(segments)
    bounds, at = [], 0
    for s in segments:
        bounds.append((at, at + len(s)))
        at += len(s)
    matches = [(m.start(), m.end(), m.group(0)) for m in IDENTIFIER.finditer(joined)]
    # Only names lying wholly inside one segment count; a name split by a cut keeps its spelling.
    whole = [(a, b, n) for a, b, n in matches if any(lo <= a and b <= hi for lo, hi in bounds)]
    names = list(dict.fromkeys(n for _, _, n in whole if renameable(n)))
    taken = {n for _, _, n in matches}
    mapping: dict[str, str] = {}
    for name in names:
        if rng.random() >= share:
            continue
        # A few tries for a replacement not already in the text: two names must never merge.
        new = next((c for c in (rng.choice(pool) for _ in range(8 if pool else 0)) if c not in taken), None)
        if new is None:
            continue
        taken.add(new)
        mapping[name] = new
    if not mapping:
        return segments
    out = []
    for lo, hi in bounds:
        parts, last = [], lo
        for a, b, n in whole:
            if lo <= a and b <= hi and n in mapping:
                parts += [joined[last:a], mapping[n]]
                last = b
        out.append("".join(parts) + joined[last:hi])
    return out
