"""scripts/train_gpu.sh in its CPU short mode: the GPU piece's whole path (unpack the corpus
shards, continue the committed state, export, tune, score) runs end to end and leaves the files
a GPU run brings back, with the resume state further along than the committed one."""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dg_engine.train.corpus import split

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _shards(tmp_path: Path) -> Path:
    shards = tmp_path / "corpus.jsonl.xz"
    train, _ = split(limit=40)
    with lzma.open(shards, "wb") as f:
        for s in train[:40]:
            row = {"kind": "python", "source": "cpython-stdlib", "path": s.name, "text": s.text}
            f.write((json.dumps(row) + "\n").encode())
        f.write((json.dumps({"kind": "prose", "source": "docs", "path": "a.md",
                             "text": "Plain words about code and how it runs. " * 300}) + "\n").encode())
    return shards


def _script(out: Path, shards: Path, **env) -> None:
    env = dict(os.environ, DEVICE="cpu", TUNE_CASES="2", SHARDS=str(shards), PYTHON=sys.executable, **env)
    run = subprocess.run(["bash", str(ROOT / "scripts" / "train_gpu.sh"), str(out), "0.1", "1"], env=env,
                         capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stderr[-3000:]


def test_the_gpu_script_runs_a_short_piece_on_the_cpu(tmp_path: Path):
    out = tmp_path / "piece"
    _script(out, _shards(tmp_path))
    committed = json.loads((ROOT / "engine" / "train" / "state" / "state.json").read_text())
    state = json.loads((out / "state" / "state.json").read_text())
    assert state["step"] > committed["step"] and state["tokens"] > committed["tokens"]
    assert (out / "model" / "model.safetensors").stat().st_size > 1_000_000
    tuned = json.loads((out / "model" / "generation_config.json").read_text())
    assert "max_denoising_steps" in tuned and "entropy_bound" in tuned["sampler_config"]  # the tuner wrote it
    score = [json.loads(line) for line in (out / "score.jsonl").read_text().splitlines()]
    assert score[-1]["cases"] == 2 and score[-1]["step"] == state["step"]
    assert (out / "log.csv").read_text().startswith("step,")
    # The checkout itself is untouched: the piece worked on copies.
    assert json.loads((ROOT / "engine" / "train" / "state" / "state.json").read_text()) == committed


def test_the_gpu_script_trains_the_ar_baseline_to_a_token_budget(tmp_path: Path):
    out = tmp_path / "piece"
    own = ROOT / "engine" / "train" / "ar_state" / "state.json"
    before = own.read_text() if own.exists() else None
    # From the committed baseline state when there is one (the script continues it), else from scratch.
    start = json.loads(before) if before else {"step": 0, "tokens": 0}
    budget = start["tokens"] + 1500
    _script(out, _shards(tmp_path), OBJECTIVE="ar", AR_TOKENS=str(budget))
    state = json.loads((out / "ar_state" / "state.json").read_text())
    assert state["config"]["objective"] == "ar" and state["config"]["max_tokens"] == budget
    # The budget ended it, not the minutes.
    assert state["tokens"] >= budget and start["step"] < state["step"] < start["step"] + 10
    committed = json.loads((ROOT / "engine" / "train" / "state" / "state.json").read_text())
    assert state["config"]["size"] == committed["config"]["size"]
    assert (out / "ar_model" / "model.safetensors").stat().st_size > 1_000_000
    assert (out / "ar_log.csv").read_text().startswith("step,")
    assert (own.read_text() if own.exists() else None) == before  # the checkout is untouched
