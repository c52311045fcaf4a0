"""The obvious fills: five holes any completion tool should get, scored per model.

A closing bracket, `return` of the only variable in scope, `self.y = y` in `__init__`, the next
item of an obvious sequence and the import the code below uses. They become tests of the suite
once the shipped model passes them; until then this records, for each model asked about, which it
gets and what it wrote instead. Every hole goes through the server's own pipeline
(`dg_lsp.fill.run_fill`: the context the editor's cursor gives, the variable-length canvases, the
syntax post-processing and ranking), as ghost text would, with the model's own sampler settings.

    python -m benchmarks.obvious [--quick] [--model embedded] [--model runs/export ...]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from . import common
from .fixtures import model_label, resolve_model


@dataclass(frozen=True)
class Obvious:
    name: str
    before: str
    after: str
    want: str  # the fill, compared with surrounding whitespace stripped


CASES = (
    Obvious("closing bracket", "def total(values):\n    return sum(values", "\n", ")"),
    Obvious("return the only variable", "def squares(n):\n    result = [i * i for i in range(n)]\n    return ", "\n",
            "result"),
    Obvious("self.y = y in __init__", "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ",
            "\n\n    def norm(self):\n        return (self.x ** 2 + self.y ** 2) ** 0.5\n", "self.y = y"),
    Obvious("next item of a sequence", 'DAYS = ["monday", "tuesday", "wednesday", ', ', "friday"]\n', '"thursday"'),
    Obvious("the import the code uses", "", "\n\n\ndef now():\n    return time.time()\n", "import time"),
)


def fill_case(engine, case: Obvious) -> str:
    """The best text the server would show at the hole."""
    from dg_lsp.documents import Snapshot
    from dg_lsp.fill import FillJob, run_fill
    from dg_lsp.settings import Settings

    snapshot = Snapshot("file:///obvious/case.py", 0, "python", case.before + case.after)
    job = FillJob(snapshot, len(case.before), len(case.before), "inline", Settings())
    fill = run_fill(engine, job, None)
    return fill.texts[0] if fill.texts else ""


def score_model(model: str) -> dict:
    from dg_engine import EngineConfig, load_engine

    # fp32, so the answers do not depend on which precision is fastest on the machine.
    engine = load_engine(EngineConfig(model=model, device="cpu", dtype="float32", quantization="none"))
    rows = []
    for case in CASES:
        got = fill_case(engine, case)
        rows.append({"case": case.name, "want": case.want, "got": got, "right": got.strip() == case.want})
    return {"model": model_label(model), "right": sum(r["right"] for r in rows), "of": len(rows), "cases": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=None, help="a model directory or 'embedded'; repeatable")
    parser.add_argument("--quick", action="store_true", help="the tiny random model (the pipeline, not the answers)")
    args = parser.parse_args(argv)
    models = [resolve_model(m, args.quick) for m in args.model or [None]]
    results, load = common.under_load(lambda: [score_model(m) for m in models])
    for r in results:
        print(f"{r['model']}: {r['right']} of {r['of']}")
        for row in r["cases"]:
            print(f"  {'ok ' if row['right'] else 'no '} {row['case']}: {row['got']!r}")
    settings = {"pipeline": "dg_lsp.fill.run_fill, inline mode, default settings", "precision": "float32"}
    common.write("obvious", {"model": ", ".join(model_label(m) for m in models), "quick": args.quick,
                             "settings": settings, "load": load, "models": results}, quick=args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
