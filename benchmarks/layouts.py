"""Prompt layouts side by side: FIM sentinels, the suffix pinned in the canvas, the chat instruction.

The same model fills the same holes (held-out standard library: single lines, multi-line spans,
random spans; HumanEval-Infilling single lines) through the server's pipeline in each layout:

* `fim`: suffix-first FIM with the tokenizer's sentinels (what the embedded model is trained on);
* `pinned`: the prefix alone in the prompt, the suffix's first tokens clamped after the free
  positions of the canvas (the layout for checkpoints without sentinels);
* `chat`: the chat template with the instruction to fill the hole marker (the released
  instruction-tuned checkpoints' own interface). A model without a template gets Gemma's turn
  format (`dg_engine.tiny.GEMMA_CHAT_TEMPLATE`) for the measurement.

Recorded per layout: exact match, edit similarity, no-new-syntax-error share and latency. The
numbers choose `prompt_format = auto`'s pick for each kind of model (see the README).

    python -m benchmarks.layouts [--model DIR] [--cases 40] [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from dg_engine import EngineConfig, load_engine
from dg_engine.loader import resolve_source
from dg_engine.tiny import GEMMA_CHAT_TEMPLATE
from dg_lsp.settings import Settings

from . import common
from .features import fills
from .fixtures import model_label, resolve_model
from .heldout import cut_holes, held_out_files
from .humaneval import load_cases
from .quality import score

LAYOUTS = ("fim", "pinned", "chat")


def with_chat_template(model_dir: Path, into: Path) -> Path:
    """A copy of the model directory whose tokenizer has a chat template (Gemma's, if it had none)."""
    target = into / "model"
    shutil.copytree(model_dir, target)
    config = target / "tokenizer_config.json"
    data = json.loads(config.read_text()) if config.is_file() else {}
    if not data.get("chat_template") and not (target / "chat_template.jinja").is_file():
        data["chat_template"] = GEMMA_CHAT_TEMPLATE
        config.write_text(json.dumps(data, indent=2))
    return target


def run(model: str, sets: dict, tmp: Path) -> dict:
    directory = with_chat_template(resolve_source(model), tmp)
    out = {}
    for layout in LAYOUTS:
        engine = load_engine(EngineConfig(model=str(directory), prompt_format=layout))
        row = {}
        for name, cases in sets.items():
            started = time.perf_counter()
            texts = fills(engine, cases, "fim", Settings())
            ms = (time.perf_counter() - started) * 1000 / max(1, len(cases))
            row[name] = {**score(cases, texts, None), "ms_per_fill": round(ms, 1)}
        out[layout] = row
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None)
    p.add_argument("--cases", type=int, default=40, help="holes per set")
    p.add_argument("--quick", action="store_true", help="the tiny model, 2 holes per set")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model = resolve_model(args.model, args.quick)
    n = 2 if args.quick else args.cases
    files = held_out_files()
    sets = {kind: cut_holes(files, {kind: n}, seed=3) for kind in ("single_line", "multi_line", "random_span")}
    try:
        sets["he_single_line"] = load_cases("he_single_line", limit=n)
    except FileNotFoundError:
        pass  # HumanEval-Infilling is not on this machine; the held-out sets still compare
    with tempfile.TemporaryDirectory(prefix="dg-layouts-") as tmp:
        result, load = common.under_load(lambda: run(model, sets, Path(tmp)))
    payload = {"model": model_label(model), "quick": args.quick, "load": load,
               "settings": {"cases_per_set": n, "sets": list(sets)}, "layouts": result}
    path = common.write("layouts", payload, quick=args.quick)
    for layout, row in result.items():
        print(layout, {name: (r["exact_match"], r["edit_similarity"], r["ms_per_fill"]) for name, r in row.items()})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
