"""Compare two models hole by hole: is a piece's end better than the shipped model, or a tie?

Every piece ends scored on the same 400 held-out holes, and the totals of two models close in
quality differ by less than their noise (25 exact against 24 says nothing). Both models fill the
*same* holes, though, so most of that noise cancels when they are compared per hole: the exact
matches only one of them got (the discordant pairs) decide exact match, with an exact two-sided
sign test, and the per-hole differences of edit similarity, resampled with a seeded bootstrap,
give an interval for the gain. A model is better when the interval lies above zero and it loses no
more exact matches than it wins, or when it wins significantly more exact matches than it loses
(the sign test below 0.05) and the interval does not lie below zero; `verdict` says so in one
word. Exact match is the measure the targets are set in: a change that makes seven more of these
fills exact and none fewer, while the similarity of the rest moves within its noise, is better on
them (whether it ships also depends on the obvious fills and, for decoding, the quality table).

The per-hole scores are written next to a piece's row (`score.py --per-case`), fingerprinted by
the holes they were measured on, so a comparison of scores from different holes is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path


def fingerprint(middles: list[str]) -> str:
    """Identifies the hole set: the same held-out holes in the same order give the same string."""
    digest = hashlib.sha256()
    for middle in middles:
        digest.update(middle.encode("utf-8") + b"\0")
    return digest.hexdigest()[:16]


def per_case_record(middles: list[str], exact: list[bool], similarity: list[float]) -> dict:
    """Each hole's score as it is written and compared (similarities to four decimals)."""
    return {"holes": fingerprint(middles), "exact": [int(e) for e in exact],
            "similarity": [round(s, 4) for s in similarity]}


def write_per_case(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record) + "\n")


def read_per_case(path: Path) -> dict:
    try:
        record = json.loads(path.read_text())
        if len(record["exact"]) != len(record["similarity"]):
            raise ValueError("exact and similarity differ in length")
        return record
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a per-hole score file ({e})") from e


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact binomial p of `wins` against `losses` under no difference (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_comparison(new: dict, old: dict, draws: int = 2000, seed: int = 0) -> dict:
    """How `new` does against `old` on the same holes (both as `read_per_case` returns them)."""
    if new["holes"] != old["holes"] or len(new["exact"]) != len(old["exact"]):
        raise ValueError("the two scores were measured on different holes")
    n = len(new["exact"])
    wins = sum(a and not b for a, b in zip(new["exact"], old["exact"]))
    losses = sum(b and not a for a, b in zip(new["exact"], old["exact"]))
    diffs = [a - b for a, b in zip(new["similarity"], old["similarity"])]  # [n]
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(draws))
    low, high = means[int(0.025 * draws)], means[int(0.975 * draws) - 1]
    return {"holes": n, "exact_wins": wins, "exact_losses": losses, "exact_p": round(sign_test_p(wins, losses), 4),
            "similarity_gain": round(sum(diffs) / n, 4), "similarity_ci95": [round(low, 4), round(high, 4)],
            "verdict": verdict(wins, losses, low, high)}


# Below this, the discordant exact matches decide on their own (unless the similarity disagrees).
EXACT_SIGNIFICANCE = 0.05


def verdict(wins: int, losses: int, low: float, high: float) -> str:
    """'better' ships; 'worse' and 'tie' keep the shipped model."""
    significant = sign_test_p(wins, losses) < EXACT_SIGNIFICANCE
    if (low > 0 and wins >= losses) or (significant and wins > losses and high > 0):
        return "better"
    if (high < 0 and losses >= wins) or (significant and losses > wins and low < 0):
        return "worse"
    return "tie"
