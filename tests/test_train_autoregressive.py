"""Greedy AR decoding through the encoder: matches recomputation, stops at stop ids."""

from __future__ import annotations

import ast
from pathlib import Path

import torch

from dg_engine.autoregressive import ar_generate
from dg_engine.train.model import build_model
from dg_engine.train.objective import softcapped_logits

PROMPT = [2, 4, 10, 11, 3, 12, 13, 5]


def test_matches_greedy_without_cache():
    model = build_model("tiny", 300, seed=0).eval()
    ids, passes, timings = ar_generate(model, PROMPT, 8, set())
    assert len(ids) == 8 and passes == 8 and timings.total_ms > 0
    seq = list(PROMPT)
    with torch.no_grad():
        for _ in range(8):
            hidden = model.model.encoder(input_ids=torch.tensor([seq])).last_hidden_state
            seq.append(int(softcapped_logits(model, hidden[:, -1]).argmax(-1)))
    assert seq[len(PROMPT) :] == ids


def test_stops_at_stop_id():
    model = build_model("tiny", 300, seed=0).eval()
    full, _, _ = ar_generate(model, PROMPT, 6, set())
    stop = full[2]
    first = full.index(stop)
    ids, passes, _ = ar_generate(model, PROMPT, 6, {stop})
    assert ids == full[:first]
    assert passes == first + 1


def test_imports_no_server_code():
    tree = ast.parse(Path("engine/autoregressive.py").read_text())
    modules = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m.split(".")[0] in {"dg_lsp", "lsprotocol", "tree_sitter"} for m in modules)
