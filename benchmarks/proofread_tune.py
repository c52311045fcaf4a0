"""Choosing proofreading's margins on documentation the model trains on, never on the benchmark's.

`dg_engine.proofread` keeps an edit when the paragraph with it is more likely, under the model's
next-token head, by more than a margin of its kind (typo, agreement, doubled word, article). The
margins trade fixes against broken words. This injects the errors of `benchmarks/prose.py` (same
generator), and an article swapped where there is one, into paragraphs of the corpus's training
documentation, scores every candidate edit once, and judges each margin of a grid on the same
scores: the share of injected errors fixed and of correct words changed. The shipped `Margins` are
the setting worth most to a writer, counting each fix once and each broken word twice (`value`),
the larger margins on ties; the held-out figures are `benchmarks/prose.py`'s.

    python -m benchmarks.proofread_tune [--paragraphs 120] [--model embedded]

Needs the built corpus (`python -m dg_engine.train.corpus build`) for the training paragraphs.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from dataclasses import asdict

from dg_engine.lexicon import load as load_lexicon
from dg_engine.proofread import ARTICLES, Margins, candidates, choose, gains
from dg_engine.prompt import encode

from . import common
from .fixtures import load_model_for, model_label
from .prose import corrupt, judge

GRID = {"typo": (2.0, 4.0, 6.0, 8.0), "agreement": (0.0, 1.0, 2.0, 3.0), "doubled": (0.0, 1.0, 2.0),
        "article": (0.0, 1.0, 2.0, 3.0, 4.0)}
BROKEN_COST = 2.0


def training_paragraphs(count: int, seed: int) -> list[str]:
    from dg_engine.train.documents import iter_documents

    pool = []
    for doc in iter_documents(kind="prose"):
        for block in doc.text.split("\n\n"):
            text = " ".join(block.split())
            if 20 <= len(text.split()) <= 90 and text[:1].isupper() and text.endswith(".") and "`" not in text:
                pool.append(text)
    return random.Random(seed).sample(pool, min(count, len(pool)))


def swap_article(text: str, rng: random.Random) -> str:
    """A fourth error where the paragraph has an article the benchmark's errors left alone: `a`
    for `an` or back (the benchmark itself injects only its three kinds)."""
    words = text.split(" ")
    spots = [i for i, w in enumerate(words[:-1]) if w in ARTICLES and words[i + 1][:1].isalpha()]
    if not spots:
        return text
    i = rng.choice(spots)
    words[i] = ARTICLES[words[i]]
    return " ".join(words)


def scored(engine, paragraphs: list[str], seed: int) -> list[tuple]:
    """(original, corrupted, edits, gains) per paragraph; every candidate scored once."""
    rng, lexicon = random.Random(seed), load_lexicon()
    bos = [engine.format.specials.bos] if engine.format.specials.bos is not None else []
    out = []
    for original in paragraphs:
        bad, _ = corrupt(original, rng)
        bad = swap_article(bad, rng)
        edits = candidates(bad, lexicon)
        context = bos or encode(engine.tokenizer, "\n\n")
        variants = [encode(engine.tokenizer, e.apply(bad)) for e in edits]
        out.append((original, bad, edits, gains(engine.model, context, encode(engine.tokenizer, bad), variants)))
    return out


def judge_margins(rows: list[tuple], margins: Margins) -> dict:
    fixed = errors = broken = correct = 0
    for original, bad, edits, gains in rows:
        text = bad
        for e in sorted(choose(edits, gains, margins), key=lambda e: -e.start):
            text = e.apply(text)
        j = judge(original, bad, " ".join(text.split()))
        fixed, errors, broken, correct = fixed + j["fixed"], errors + j["errors"], broken + j["broken"], correct + j["correct"]
    return {**asdict(margins), "fixed": round(fixed / max(1, errors), 4), "broken": round(broken / max(1, correct), 4),
            "fixed_words": fixed, "broken_words": broken}


def value(result: dict) -> float:
    """What a setting is worth to a writer: each fix, less twice each correct word it breaks (a
    broken word has to be noticed and undone; a missed error is only left as it was)."""
    return result["fixed_words"] - BROKEN_COST * result["broken_words"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None)
    p.add_argument("--paragraphs", type=int, default=120)
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args(argv)
    engine, model = load_model_for(args.model, False, 2)
    try:
        paragraphs = training_paragraphs(args.paragraphs, args.seed)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 1
    rows = scored(engine, paragraphs, args.seed)
    grid = [judge_margins(rows, Margins(*m)) for m in itertools.product(*GRID.values())]
    best = max(grid, key=lambda g: (value(g), g["typo"], g["agreement"], g["doubled"], g["article"]))
    shipped = judge_margins(rows, Margins())
    for g in grid:
        print(g)
    print(f"best: {best}\nshipped: {shipped}")
    path = common.write("proofread_margins", {"model": model_label(model), "paragraphs": len(rows),
                                              "broken_cost": BROKEN_COST, "best": best, "shipped": shipped,
                                              "grid": grid})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
