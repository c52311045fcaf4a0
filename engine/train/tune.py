"""Tune the sampler defaults of a trained model on held-out holes, and write them to the model.

The right number of denoising steps, entropy bound and temperature schedule depend on how well
trained a model is, so they are chosen after training, by exact match on holes cut from the
held-out standard-library modules (never a training file), with edit similarity breaking ties:
a weak model scores no exact matches at all, and choosing among equals by speed alone picked the
setting that stops earliest and leaves the most noise in its fills. Settings within noise of the
best similarity are then told apart by speed. They are stored in the model directory's
generation_config.json, where `Engine` reads its defaults.

    python -m dg_engine.train.tune --model engine/embedded --cases 60 --write
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import json
import random
import time
from dataclasses import replace
from pathlib import Path

GRID = {
    "max_steps": (8, 12, 20),
    "entropy_bound": (0.5, 2.0),
    "t_max": (0.3, 0.8),
    "stability_threshold": (1, 2),
}
KINDS = ("rest_of_line", "whole_line", "random_span")


def held_out_cases(engine, count: int, seed: int = 0, root: Path | None = None):
    from ..prompt import FimFormat
    from .corpus import split
    from .examples import ExampleConfig, ExampleSource

    _, held_out = split(root)
    config = ExampleConfig(max_prompt_tokens=512, canvas_lengths=(32,), middle_so_far_prob=0.0, chunk_prob=0.0,
                           kind_weights=tuple(1.0 if k in KINDS else 0.0 for k in
                                              ("rest_of_line", "whole_line", "multi_line", "block_body", "empty",
                                               "random_span", "continuation")))
    source = ExampleSource(held_out, FimFormat(engine.tokenizer, engine.format.specials), config)
    rng = random.Random(seed)
    return [source.sample(rng, 32) for _ in range(count)]


def score(engine, cases, per_case: list | None = None, **sampling) -> dict:
    """Totals over `cases`; each hole's (exact, similarity) is appended to `per_case` when given."""
    from ..engine import FillRequest

    engine.defaults = replace(engine.defaults, **{k: v for k, v in sampling.items() if k != "max_steps"},
                              max_steps=sampling["max_steps"])
    hits, similarity, steps, ended, started = 0, 0.0, 0, 0, time.perf_counter()
    for i, case in enumerate(cases):
        best = engine.fill(FillRequest(case.prefix, case.suffix, seed=i, reuse_cache=False)).candidates[0]
        exact = best.text.strip() == case.middle.strip()
        ratio = difflib.SequenceMatcher(None, best.text.strip(), case.middle.strip(), autojunk=False).ratio()
        hits += exact
        similarity += ratio
        steps += best.steps
        ended += best.finished
        if per_case is not None:
            per_case.append((exact, ratio))
    return {"exact_match": hits / len(cases), "cases": len(cases), "edit_similarity": round(similarity / len(cases), 4),
            # How often the model closed the middle inside its one canvas (nine held-out middles in ten fit one).
            "ended": round(ended / len(cases), 4),
            "mean_steps": steps / len(cases),
            "ms_per_case": (time.perf_counter() - started) * 1000 / len(cases), **sampling}


# Edit similarities closer than this on a few dozen holes are noise, not a better setting.
SIMILARITY_TIE = 0.005
# So is one exact match more or less: a weak model's single lucky hole once chose a hot
# temperature that then rewrote correct code it was seeded with.
EXACT_TIE_CASES = 1


def choose(results: list[dict]) -> dict:
    """The best exact match (within EXACT_TIE_CASES holes); among settings tied on it and within
    SIMILARITY_TIE of the best edit similarity, the one with the fewest steps (the fastest that is
    not measurably worse)."""
    top_exact = max(r["exact_match"] for r in results)
    tied = [r for r in results
            if r["exact_match"] >= top_exact - (EXACT_TIE_CASES / r["cases"] if r.get("cases") else 0.0) - 1e-12]
    top_similarity = max(r["edit_similarity"] for r in tied)
    close = [r for r in tied if r["edit_similarity"] >= top_similarity - SIMILARITY_TIE]
    return min(close, key=lambda r: (r["mean_steps"], -r["edit_similarity"]))


def tuner_arguments(description: str, cases: int, written_to: str) -> argparse.ArgumentParser:
    """The command line every tuner takes: which model, how many held-out cases, where to write."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--cases", type=int, default=cases)
    parser.add_argument("--write", action="store_true", help=f"store the best settings in {written_to}")
    parser.add_argument("--report", default=None, help="also write all scores to this JSON file")
    parser.add_argument("--corpus-root", default=None, help="the CPython 3.11 Lib/ the held-out cases come from")
    return parser


def fp32_engine(model: str):
    """fp32, so scores stay comparable across pieces and machines whatever precision is fastest here."""
    from ..config import EngineConfig
    from ..engine import load_engine

    return load_engine(EngineConfig(model=model, dtype="float32", quantization="none"))


def main(argv: list[str] | None = None) -> int:
    args = tuner_arguments(__doc__.splitlines()[0], 60, "generation_config.json").parse_args(argv)
    engine = fp32_engine(args.model)
    cases = held_out_cases(engine, args.cases, root=Path(args.corpus_root) if args.corpus_root else None)
    base = engine.defaults
    results = []
    for values in itertools.product(*GRID.values()):
        sampling = dict(zip(GRID, values))
        results.append(score(engine, cases, **sampling))
        print(json.dumps(results[-1]))
    engine.defaults = base
    best = choose(results)
    print("best:", json.dumps(best))
    if args.report:
        Path(args.report).write_text(json.dumps({"cases": args.cases, "kinds": KINDS, "results": results, "best": best}, indent=2))
    if args.write:
        from ..loader import resolve_source

        path = resolve_source(args.model) / "generation_config.json"
        config = json.loads(path.read_text())
        config["max_denoising_steps"] = best["max_steps"]
        config["sampler_config"]["entropy_bound"] = float(best["entropy_bound"])
        config["t_max"] = float(best["t_max"])
        config["stability_threshold"] = int(best["stability_threshold"])
        path.write_text(json.dumps(config, indent=2) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
