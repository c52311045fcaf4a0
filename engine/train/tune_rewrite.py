"""Tune how much a trained model doubts the text it rewrites, and write it to the model.

A rewrite (a selection, a paragraph, a next edit) seeds the canvas with the current text and
re-noises only the tokens the model finds unlikely there: below `renoise_below`. How likely a model
finds text it is shown grows with training. The first embedded model gave the "pr" of a misspelt
`prnt(i)` about 0.11 and correct code over 0.9; a model trained four times longer gave the same
"pr" 0.49, so a fixed threshold that suited the one left every typo in place for the other. The
threshold is therefore chosen per model, after training, like the sampler settings (`tune.py`),
and written beside the model in `rewrite_config.json`.

Cases are single-line statements of the held-out standard-library modules (never a training
file), each rewritten twice in its file's context: as written, where the rewrite should give the
line back unchanged, and with a typo in one identifier, where it should change that word and
nothing else. Correct lines come first (a rewrite that breaks correct code is worse than one that
misses a typo): among the thresholds that keep as many of them as the best one does, give or take
one line, the one that changes the most typos within the word is kept; ties go to the lower
threshold.

    python -m dg_engine.train.tune_rewrite --model runs/export --cases 40 --write
"""

from __future__ import annotations

import difflib
import json
import keyword
import random
import re
from dataclasses import dataclass
from pathlib import Path

THRESHOLDS = (0.1, 0.2, 0.3, 0.5, 0.7)
IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z_0-9]{4,}\b")


@dataclass(frozen=True)
class Case:
    prefix: str
    suffix: str
    line: str  # the statement as written, without its indentation
    typo: str  # the same statement with one identifier misspelt
    span: tuple[int, int]  # where the misspelt word is in `typo`


def misspell(word: str, rng: random.Random) -> str:
    """Two inner letters swapped, one dropped or one doubled; never the word itself."""
    i = rng.randrange(1, len(word) - 2)
    kind = rng.choice(("swap", "drop", "double"))
    if kind == "swap" and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == "double":
        return word[: i + 1] + word[i] + word[i + 1:]
    return word[:i] + word[i + 1:]


def cases_from(text: str, rng: random.Random, before: int = 1500, after: int = 600) -> list[Case]:
    out, offset = [], 0
    for raw in text.splitlines(keepends=True):
        start, offset = offset, offset + len(raw)
        line = raw.strip()
        if not 12 <= len(line) <= 70 or line.startswith(("#", '"', "'", "@")) or line.endswith((":", ",", "\\", "(")):
            continue
        words = [m for m in IDENTIFIER.finditer(line) if not keyword.iskeyword(m.group())]
        if not words:
            continue
        word = rng.choice(words)
        wrong = misspell(word.group(), rng)
        indent = len(raw) - len(raw.lstrip())
        out.append(Case(prefix=text[max(0, start + indent - before): start + indent],
                        suffix=text[start + indent + len(line): start + indent + len(line) + after],
                        line=line, typo=line[: word.start()] + wrong + line[word.end():],
                        span=(word.start(), word.start() + len(wrong))))
    return out


def held_out_cases(count: int, seed: int = 0, root: Path | None = None) -> list[Case]:
    from .corpus import split

    rng = random.Random(seed)
    pool = [c for f in split(root)[1] for c in cases_from(f.text, rng)]
    return random.Random(seed).sample(pool, min(count, len(pool)))


def within(original: str, changed: str, span: tuple[int, int]) -> bool:
    """Whether `changed` differs from `original` only inside `span` of it (and differs at all)."""
    ops = [op for op in difflib.SequenceMatcher(None, original, changed, autojunk=False).get_opcodes() if op[0] != "equal"]
    return bool(ops) and all(span[0] <= i1 and i2 <= span[1] for _, i1, i2, _, _ in ops)


def score(engine, cases: list[Case], threshold: float) -> dict:
    from ..engine import FillRequest

    def rewrite(i: int, prefix: str, text: str, suffix: str) -> str:
        result = engine.fill(FillRequest(prefix, suffix, seed_text=text, renoise_below=threshold, seed=i))
        return result.candidates[0].text if result.candidates else text

    kept = repaired = localized = 0
    for i, case in enumerate(cases):
        kept += rewrite(i, case.prefix, case.line, case.suffix).strip() == case.line
        fixed = rewrite(i, case.prefix, case.typo, case.suffix).strip()
        repaired += fixed == case.line
        localized += within(case.typo, fixed, case.span)
    n = len(cases)
    return {"renoise_below": threshold, "cases": n, "kept": round(kept / n, 4),
            "repaired": round(repaired / n, 4), "localized": round(localized / n, 4)}


def choose(results: list[dict]) -> dict:
    top = max(r["kept"] for r in results)
    safe = [r for r in results if r["kept"] >= top - 1 / r["cases"] - 1e-9]
    return max(safe, key=lambda r: (r["repaired"] + r["localized"], -r["renoise_below"]))


def main(argv: list[str] | None = None) -> int:
    from ..config import REWRITE_CONFIG
    from ..loader import resolve_source
    from .tune import fp32_engine, tuner_arguments

    args = tuner_arguments(__doc__.splitlines()[0], 40, REWRITE_CONFIG).parse_args(argv)
    engine = fp32_engine(args.model)
    cases = held_out_cases(args.cases, root=Path(args.corpus_root) if args.corpus_root else None)
    results = []
    for threshold in THRESHOLDS:
        results.append(score(engine, cases, threshold))
        print(json.dumps(results[-1]), flush=True)
    best = choose(results)
    print("best:", json.dumps(best))
    if args.report:
        Path(args.report).write_text(json.dumps({"results": results, "best": best}, indent=2) + "\n")
    if args.write:
        path = resolve_source(args.model) / REWRITE_CONFIG
        path.write_text(json.dumps({"renoise_below": best["renoise_below"]}, indent=2) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
