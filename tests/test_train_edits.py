"""Edit traces: each kind makes a consistent `after`, the user's edit as `current`, and examples
whose middle is the window's target, with the stale text aligned for the noise."""

from __future__ import annotations

import ast
import random

import numpy as np
import pytest
import torch

from dg_engine.nextedit import edit_chunks, line_hunks
from dg_engine.prompt import choose_format
from dg_engine.train.blocks import BlockBatch, block_diffusion_loss, corrupt_blocks
from dg_engine.train.corpus import split
from dg_engine.train.edits import EditSource, align_stale, trace_example
from dg_engine.train.traces import import_trace, make_trace, rename_trace, sibling_trace, signature_trace
from dg_engine.train.examples import ExampleConfig, ExampleSource
from dg_engine.train.model import build_model
from dg_engine.train.sequences import BlockSource, MixConfig
from dg_engine.train.tokenizer import train_tokenizer

POOL = ["width", "height", "total", "result"]

RENAME_SRC = '''\
def area(w, h):
    scale = 2
    return w * h * scale


def other(w):
    return w + 1
'''


def _seeds(fn, *args, kind=None, tries=60):
    """Traces from the first seeds for which `fn` finds one (rng-driven choices vary)."""
    out = []
    for seed in range(tries):
        t = fn(*args, random.Random(seed), POOL) if kind is None else fn(*args, random.Random(seed))
        if t is not None:
            out.append(t)
    return out


def test_rename_changes_every_use_in_the_scope_and_nothing_else():
    traces = [t for t in _seeds(rename_trace, RENAME_SRC, ast.parse(RENAME_SRC)) if "def area(" in t.before]
    assert traces
    for t in traces:
        ast.parse(t.after)
        changed = [(a, b) for a, b in zip(t.before.splitlines(), t.after.splitlines()) if a != b]
        assert changed, "the target renames something"
        # A rename inside `area` never reaches `other`, whose `w` is another variable.
        if any("area" in a or "scale" in a or "return w * h" in a for a, _ in changed):
            assert t.after.split("def other")[1] == t.before.split("def other")[1]
        # The user made one or two of the changes; the rest are the target.
        done = line_hunks(t.before, t.current)
        assert done and line_hunks(t.current, t.after)


SIG_SRC = '''\
def scale(value, factor):
    return value * 2


def use():
    a = scale(1, 2)
    b = scale(a,
              3)
    return a + b
'''


def test_signature_changes_reach_every_call():
    traces = _seeds(signature_trace, SIG_SRC, ast.parse(SIG_SRC))
    added = [t for t in traces if t.after.count("scale(") == 3 and "def scale(value, factor, " in t.after]
    removed = [t for t in traces if "def scale(value):" in t.after]
    assert added and removed
    for t in added:
        new = t.after.split("def scale(value, factor, ")[1].split(")")[0]
        assert f"scale(1, 2, {new})" in t.after and f"3, {new})" in t.after
        assert "def scale(value, factor, " in t.current and f"scale(1, 2)" in t.current
    for t in removed:
        # `factor` is unused in the body, so dropping it drops the second argument of each call.
        assert "scale(1)" in t.after and "scale(a)" in t.after.replace("\n", "").replace(" ", "")
        ast.parse(t.after)


SIB_SRC = '''\
class Point:
    def __init__(self, x, y, z):
        self.x = x
        self.y = y
        self.z = z
'''


def test_sibling_change_is_applied_to_every_line_of_the_run():
    traces = _seeds(sibling_trace, SIB_SRC)
    assert traces
    for t in traces:
        ast.parse(t.after)
        run_after = t.after.splitlines()[2:5]
        run_current = t.current.splitlines()[2:5]
        assert all(line not in SIB_SRC.splitlines() for line in run_after)  # every sibling changed
        assert sum(line not in SIB_SRC.splitlines() for line in run_current) == 1  # the user changed one


IMP_SRC = '''\
import os
from math import sqrt, floor


def f(p):
    return os.path.join(p, "x")


def g(v):
    v = abs(v)
    return sqrt(v)
'''


def test_import_traces_add_the_missing_import_or_drop_the_unused_one():
    traces = _seeds(import_trace, IMP_SRC, ast.parse(IMP_SRC), kind="import")
    added = [t for t in traces if t.after == IMP_SRC]
    dropped = [t for t in traces if t.before == IMP_SRC]
    assert added and dropped
    for t in added:
        # The current text uses a name whose import is gone; the history is the inserted use.
        assert len(t.current.splitlines()) == len(IMP_SRC.splitlines()) - (1 if "import os" not in t.current else 0)
        hunk = line_hunks(t.before, t.current)[-1]
        assert not hunk.before and ("os.path" in hunk.after[0] or "sqrt(v)" in hunk.after[0])
    for t in dropped:
        ast.parse(t.after)
        assert t.after.count("sqrt") + t.after.count("os") < IMP_SRC.count("sqrt") + IMP_SRC.count("os")


@pytest.fixture(scope="module")
def fmt():
    train, _ = split(limit=6)
    return choose_format(train_tokenizer((f.text for f in train), vocab_size=400))


def test_an_example_shows_the_edit_and_trains_the_window_target(fmt):
    t = next(t for t in _seeds(signature_trace, SIG_SRC, ast.parse(SIG_SRC)) if "def scale(value):" in t.after)
    e = trace_example(t, fmt, random.Random(0), max_tokens=400, multiple=16)
    assert e is not None and e.kind == "edit_signature"
    # The middle is the window as the edit implies it; prefix + stale window + suffix is the current text.
    assert "scale(1)" in e.middle and e.middle in t.after
    assert edit_chunks(line_hunks(t.before, t.current))[0] in e.chunks
    assert len(e.canvas_ids) % 16 == 0 and len(e.stale_ids) == len(e.canvas_ids)
    tok = fmt.tokenizer
    stale = [s for s in e.stale_ids if s >= 0]
    assert set(stale) <= set(tok(t.current)["input_ids"]) | {fmt.specials.end_of_middle}
    # Most tokens stand where they stood: the stale text is the seed of a good canvas.
    same = sum(a == b for a, b in zip(e.canvas_ids, e.stale_ids))
    assert same >= 0.6 * len(stale)


def test_align_stale_marks_insertions_as_having_no_stale_token():
    assert align_stale([1, 2, 9, 9, 3], [1, 2, 3]) == [1, 2, -1, -1, 3]
    assert align_stale([1, 5, 3], [1, 4, 3]) == [1, 4, 3]


def test_stale_tokens_stand_where_noise_did_not_fall():
    ids = torch.arange(10, 30).reshape(2, 10)
    stale = torch.full_like(ids, -1)
    stale[0, 2:6] = 99
    ones = torch.ones_like(ids)
    batch = BlockBatch(ids, ones.bool(), torch.zeros_like(ids), ones.float(), ones.bool(), stale)
    plain = corrupt_blocks(batch, 50, 0.05, torch.Generator().manual_seed(3), stale_prob=0.0)
    seeded = corrupt_blocks(batch, 50, 0.05, torch.Generator().manual_seed(3), stale_prob=1.0)
    differ = plain != seeded
    assert differ.any()
    assert (seeded[differ] == 99).all() and (plain[differ] == ids[differ]).all()  # stale only where clean
    assert not differ[1].any()  # a row without stale tokens is noised as ever


def test_edit_rows_join_the_mix_and_train(fmt):
    train, _ = split(limit=40)
    src = ExampleSource(train, fmt, ExampleConfig(max_prompt_tokens=96, min_prompt_tokens=16))
    edits = EditSource.from_examples(src)
    code = np.random.default_rng(0).integers(8, 400, 5000).astype(np.uint16)
    mix = MixConfig(seq_len=256, fim_share=0.0, prose_share=0.0, edit_share=1.0, block_sizes=(16,),
                    block_weights=(1.0,), max_edit_tokens=120)
    batch = BlockSource(src, code, None, mix, edits).batch(0, 1, 4)
    assert batch.stale is not None and (batch.stale >= 0).sum() > 20
    model = build_model("tiny", len(fmt.tokenizer), seed=0)
    parts = block_diffusion_loss(model, batch, torch.Generator().manual_seed(0))
    assert torch.isfinite(parts.total)
    assert make_trace("def broken(:\n", "rename", random.Random(0), POOL) is None
