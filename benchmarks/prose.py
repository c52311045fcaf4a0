"""The paragraph rewrite on held-out documentation with injected errors: what it fixes, what it breaks.

Paragraphs come from the docstrings of the held-out standard-library modules (prose the model was
never trained on). Each gets three injected word errors from a seeded generator: a typo (two
letters swapped, one dropped or doubled), a subject-verb agreement error (`is`/`are`,
`has`/`have`, `was`/`were`, `does`/`do`) and a doubled word. The corrupted paragraph sits in a
Markdown document between its neighbours, and the server's own paragraph rewrite
(`dg_lsp.fill.run_fill` in `paragraph` mode, as `dg.rewriteParagraph` runs it) rewrites it.

Words are aligned with difflib against the original paragraph:

* fixed: the share of injected errors whose words are back to the original;
* broken: the share of the correct words that the rewrite changed;
* unchanged: the share of paragraphs returned exactly as given.

Targets: at least 50% fixed, at most 2% broken.

    python -m benchmarks.prose [--model DIR] [--paragraphs 100] [--quick]
"""

from __future__ import annotations

import argparse
import ast
import difflib
import random
import re
import sys
import textwrap
import time

from dg_lsp.documents import Snapshot
from dg_lsp.fill import FillJob, run_fill
from dg_lsp.settings import Settings

from . import common
from .fixtures import load_model_for, model_label
from .heldout import held_out_files

TARGETS = {"fixed": 0.5, "broken": 0.02}
AGREEMENT = {"is": "are", "are": "is", "has": "have", "have": "has", "was": "were", "were": "was", "does": "do",
             "do": "does"}
WORD = re.compile(r"\S+")


def paragraphs(min_words: int = 20, max_words: int = 90) -> list[str]:
    """Prose paragraphs of the held-out modules' docstrings, reflowed to single lines."""
    out = []
    for f in held_out_files():
        try:
            tree = ast.parse(f.text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node)
            for block in (doc or "").split("\n\n"):
                lines = [line.strip() for line in block.splitlines()]
                # Prose only: no doctests, tables, lists or indented code.
                if any(line.startswith((">>>", "...", "-", "*", "|", "+")) or ":" == line[-1:] for line in lines if line):
                    continue
                text = " ".join(line for line in lines if line)
                if min_words <= len(text.split()) <= max_words and text[:1].isupper() and text.endswith("."):
                    out.append(text)
    return list(dict.fromkeys(out))


def _typo(word: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(word) - 2)
    kind = rng.choice(("swap", "drop", "double"))
    if kind == "swap":
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == "drop":
        return word[:i] + word[i + 1 :]
    return word[: i + 1] + word[i] + word[i + 1 :]


def corrupt(text: str, rng: random.Random) -> tuple[str, int]:
    """The paragraph with a typo, an agreement error (when it has a verb to flip) and a doubled
    word, on three different words; returns it and the number of errors injected."""
    words = text.split(" ")
    free = set(range(1, len(words) - 1))
    injected = 0
    plain = [i for i in free if words[i].isalpha() and len(words[i]) >= 5]
    if plain:
        i = rng.choice(plain)
        words[i] = _typo(words[i], rng)
        free -= {i - 1, i, i + 1}
        injected += 1
    verbs = [i for i in free if words[i] in AGREEMENT]
    if verbs:
        i = rng.choice(verbs)
        words[i] = AGREEMENT[words[i]]
        free -= {i - 1, i, i + 1}
        injected += 1
    short = [i for i in free if words[i].isalpha() and len(words[i]) <= 4]
    if short:
        i = rng.choice(short)
        words.insert(i, words[i])
        injected += 1
    return " ".join(words), injected


def changed_positions(original: list[str], other: list[str]) -> set[int]:
    """Indices of `original` words that `other` replaced or deleted, or inserted before."""
    out: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, original, other, autojunk=False).get_opcodes():
        if tag == "insert":
            out.add(i1)
        elif tag != "equal":
            out.update(range(i1, i2))
    return out


def judge(original: str, corrupted: str, rewritten: str) -> dict:
    words = WORD.findall(original)
    errors = changed_positions(words, WORD.findall(corrupted))
    changed = changed_positions(words, WORD.findall(rewritten))
    correct = len(words) - len(errors)
    return {"errors": len(errors), "fixed": len(errors - changed), "correct": correct,
            "broken": len(changed - errors), "unchanged": rewritten.strip() == corrupted.strip()}


def document(before: str, paragraph: str, after: str) -> tuple[str, int, int]:
    wrap = lambda t: textwrap.fill(t, 88)
    head = f"# Notes\n\n{wrap(before)}\n\n"
    body = wrap(paragraph)
    return head + body + f"\n\n{wrap(after)}\n", len(head), len(head) + len(body)


def run(engine, count: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    pool = paragraphs()
    picked = rng.sample(range(len(pool)), min(count, len(pool)))
    settings = Settings()
    rows, latencies = [], []
    for n, k in enumerate(picked):
        original = pool[k]
        corrupted, _ = corrupt(original, rng)
        text, start, end = document(pool[k - 1], corrupted, pool[(k + 1) % len(pool)])
        job = FillJob(Snapshot(f"file:///bench/prose-{n}.md", 1, "markdown", text), start, end, "paragraph", settings,
                      seed=n)
        started = time.perf_counter()
        fill = run_fill(engine, job, None)
        latencies.append((time.perf_counter() - started) * 1000)
        rewritten = fill.texts[0] if fill.texts else text[start:end]
        rows.append({**judge(original, corrupted, " ".join(rewritten.split())), "original": original,
                     "corrupted": corrupted, "rewritten": rewritten})
    errors = sum(r["errors"] for r in rows)
    correct = sum(r["correct"] for r in rows)
    fixed = sum(r["fixed"] for r in rows) / max(1, errors)
    broken = sum(r["broken"] for r in rows) / max(1, correct)
    return {"paragraphs": len(rows), "injected_errors": errors, "fixed": round(fixed, 4), "broken": round(broken, 4),
            "unchanged": round(sum(r["unchanged"] for r in rows) / max(1, len(rows)), 4),
            "targets": TARGETS, "target_met": {"fixed": fixed >= TARGETS["fixed"], "broken": broken <= TARGETS["broken"]},
            "latency_ms": common.summary(latencies), "examples": rows[:5]}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None)
    p.add_argument("--paragraphs", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="the tiny random model, 3 paragraphs")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    engine, model = load_model_for(args.model, args.quick, args.threads)
    count = 3 if args.quick else args.paragraphs
    result, load = common.under_load(lambda: run(engine, count))
    payload = {"model": model_label(model), "quick": args.quick, "load": load,
               "settings": {"paragraphs": count, "threads": args.threads}, **result}
    path = common.write("prose", payload, quick=args.quick)
    print(f"fixed {result['fixed']:.0%} of {result['injected_errors']} injected errors, broke {result['broken']:.1%} "
          f"of the correct words, {result['unchanged']:.0%} of paragraphs unchanged; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
