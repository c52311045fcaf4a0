"""Checkpoints: a resumed run ends with exactly the weights of an uninterrupted one; exports load."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from dg_engine.prompt import choose_format
from dg_engine.train.corpus import split
from dg_engine.train.examples import ExampleConfig, ExampleSource
from dg_engine.train.loop import TrainConfig, train
from dg_engine.train.model import build_model
from dg_engine.train.sequences import BlockSource, MixConfig
from dg_engine.train.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    files, _ = split(limit=6)
    tok = train_tokenizer((f.text for f in files), vocab_size=400)
    cfg = ExampleConfig(max_prompt_tokens=64, min_prompt_tokens=16, canvas_lengths=(8, 16))
    return tok, ExampleSource(files, choose_format(tok), cfg)


def _blocks(src: ExampleSource) -> BlockSource:
    stream = np.array(src.fmt.tokenizer(src.sources[0].text)["input_ids"], dtype=np.uint16)
    return BlockSource(src, stream, stream[::-1].copy(), MixConfig(seq_len=48, block_sizes=(8,), block_weights=(1.0,)))


def _run(tok, src, out, steps, time_limit=None, export=None, **options):
    options.setdefault("layout", "canvas")
    cfg = TrainConfig(out=str(out), steps=steps, batch_size=2, lr=3e-3, warmup=2, size="tiny",
                      save_every=2, val_every=3, val_batches=1, log_every=1, time_limit_min=time_limit, **options)
    model = build_model("tiny", len(tok), seed=cfg.seed)
    source = _blocks(src) if cfg.layout == "blocks" else src
    state = train(model, tok, source, src, cfg, "cpu", export, progress=False)
    return model, state


@pytest.mark.parametrize("options", [{}, {"canvas_draws": 2, "bf16": True}, {"layout": "blocks"},
                                     {"layout": "blocks", "objective": "ar", "dtype": "bf16"}],
                         ids=["plain", "draws-bf16", "blocks", "blocks-ar-bf16"])
def test_resume_gives_identical_weights(setup, tmp_path, options):
    tok, src = setup
    straight, _ = _run(tok, src, tmp_path / "a", steps=6, **options)
    # Stop after the first step (time limit reached immediately), then resume to the end.
    _, first = _run(tok, src, tmp_path / "b", steps=6, time_limit=1e-9, **options)
    assert first["step"] == 1
    resumed, state = _run(tok, src, tmp_path / "b", steps=6, **options)
    assert state["step"] == 6
    for (name, a), (_, b) in zip(straight.named_parameters(), resumed.named_parameters()):
        assert torch.equal(a, b), name
    # Checkpoints are safetensors and JSON only.
    ckpt = next((tmp_path / "b").glob("step_*"))
    assert sorted(p.name for p in ckpt.iterdir()) == ["optimizer.safetensors", "state.json", "weights.safetensors"]
    assert any(k.endswith("exp_avg_sq") for k in load_file(str(ckpt / "optimizer.safetensors")))
    assert json.loads((ckpt / "state.json").read_text())["step"] == 6
    header = (tmp_path / "b" / "log.csv").read_text().splitlines()[0]
    assert header == ("step,elapsed_s,loss,diffusion_loss,ar_loss,tokens_per_s,loss_tokens_per_s,"
                      "lr,val_loss,dtype")


@pytest.mark.parametrize("layout", ["blocks", "canvas"])
def test_the_held_out_loss_does_not_depend_on_the_training_batch(setup, layout):
    """A piece trained at 16 rows a step is measured on the rows the curve's pieces, at 8, were."""
    from dg_engine.train.loop import validate

    tok, src = setup
    model = build_model("tiny", len(tok), seed=0)
    losses = [validate(model, src, TrainConfig(out="-", batch_size=b, size="tiny", layout=layout, val_batches=1,
                                               val_rows=3), "cpu") for b in (2, 4)]
    assert losses[0] == pytest.approx(losses[1], abs=1e-6)
    # The rows are what it measures: other rows, another loss.
    other = validate(model, src, TrainConfig(out="-", batch_size=2, size="tiny", layout=layout, val_batches=1,
                                             val_rows=5), "cpu")
    assert other != pytest.approx(losses[0], abs=1e-6)


def test_same_seed_same_weights(setup, tmp_path):
    tok, src = setup
    a, _ = _run(tok, src, tmp_path / "a", steps=3)
    b, _ = _run(tok, src, tmp_path / "b", steps=3)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


def test_canvas_draws_and_bf16_change_the_training(setup, tmp_path):
    tok, src = setup
    plain, _ = _run(tok, src, tmp_path / "a", steps=2)
    for name, options in (("draws", {"canvas_draws": 3}), ("bf16", {"bf16": True})):
        other, _ = _run(tok, src, tmp_path / name, steps=2, **options)
        assert any(not torch.equal(x, y) for x, y in zip(plain.parameters(), other.parameters())), name


def test_export_is_a_loadable_model_directory(setup, tmp_path):
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    tok, src = setup
    model, _ = _run(tok, src, tmp_path / "run", steps=2, export=tmp_path / "model")
    names = {p.name for p in (tmp_path / "model").iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json", "special_tokens_map.json"} <= names
    gen = json.loads((tmp_path / "model" / "generation_config.json").read_text())
    assert gen["sampler_config"]["_cls_name"] == "EntropyBoundSamplerConfig"
    loaded = DiffusionGemmaForBlockDiffusion.from_pretrained(str(tmp_path / "model"))
    assert AutoTokenizer.from_pretrained(str(tmp_path / "model"), local_files_only=True).pad_token_id == 0
    for (name, a), (_, b) in zip(model.named_parameters(), loaded.named_parameters()):
        assert torch.equal(a, b), name
    assert loaded.config.text_config.layer_types == ["full_attention"] * loaded.config.text_config.num_hidden_layers


def test_training_options_from_the_command_line():
    from dg_engine.train.__main__ import parse_args

    args = parse_args(["--out", "x", "--canvas-draws", "4", "--bf16"])
    assert (args.canvas_draws, args.bf16) == (4, True)
    assert (parse_args(["--out", "x"]).canvas_draws, parse_args(["--out", "x"]).bf16) == (1, False)
    with pytest.raises(SystemExit):
        parse_args(["--out", "x", "--canvas-draws", "0"])
    assert parse_args(["--out", "x"]).aux_weight == 0.5
    assert parse_args(["--out", "x", "--aux-weight", "1.5"]).aux_weight == 1.5
    with pytest.raises(SystemExit):
        parse_args(["--out", "x", "--aux-weight", "-1"])


def test_corpus_root_must_be_a_311_library(tmp_path, capsys):
    from dg_engine.train.__main__ import parse_args
    from dg_engine.train.corpus import stdlib_root

    assert parse_args(["--out", "x", "--corpus-root", str(stdlib_root())]).corpus_root == str(stdlib_root())
    (tmp_path / "fractions.py").write_text("x = 1\n")
    with pytest.raises(SystemExit):
        parse_args(["--out", "x", "--corpus-root", str(tmp_path)])
    assert "is not a CPython 3.11 Lib/ folder: no textwrap.py" in capsys.readouterr().err


def _cli(tmp_path, *extra):
    from dg_engine.train.__main__ import main

    main(["--corpus", "stdlib", "--corpus-limit", "6", "--size", "tiny", "--seq-len", "192", "--batch-size", "2",
          "--warmup", "2", "--val-every", "2", "--save-every", "2", "--threads", "1", "--no-progress",
          "--out", str(tmp_path / "run"), "--export", str(tmp_path / "model"), *extra])


def test_a_run_continues_from_the_committed_state_alone(tmp_path):
    import shutil

    from dg_engine.train.__main__ import main
    from dg_engine.train.resume import read_state

    _cli(tmp_path, "--steps", "3", "--save-state", str(tmp_path / "state"))
    state = read_state(tmp_path / "state")
    assert state["step"] == 3 and state["tokens"] > 0 and "--save-state" in state["argv"]
    moments = load_file(str(tmp_path / "state" / "optimizer.safetensors"))
    assert {v.dtype for k, v in moments.items() if k.endswith("exp_avg_sq")} == {torch.bfloat16}
    assert not any(k.endswith(".exp_avg") for k in moments)  # rebuilt on resume, not stored
    # A fresh clone has no run folder: only the export and the state travel.
    shutil.rmtree(tmp_path / "run")
    main(["continue", "--minutes", "5", "--state", str(tmp_path / "state"), "--out", str(tmp_path / "run"),
          "--export", str(tmp_path / "model"), "--steps", "5", "--threads", "1", "--decay-share", "0.5"])
    state = read_state(tmp_path / "state")
    assert state["step"] == 5 and state["config"]["decay_share"] == 0.5
    rows = (tmp_path / "run" / "log.csv").read_text().splitlines()[1:]
    assert int(rows[0].split(",")[0]) == 4  # it went on from step 3, not from scratch
    # --decay-share, like --procs, is the one piece's: the next piece anneals as the run does.
    main(["continue", "--minutes", "5", "--state", str(tmp_path / "state"), "--out", str(tmp_path / "run"),
          "--export", str(tmp_path / "model"), "--steps", "6", "--threads", "1"])
    state = read_state(tmp_path / "state")
    assert state["step"] == 6 and state["config"]["decay_share"] == 0.2


def test_the_rounding_check_measures_what_the_run_validated(tmp_path):
    """`python -m dg_engine.train.resume STATE`: the stored weights' held-out loss is the one the run
    logged at its last step, and the bf16-rounded weights' loss is measured beside it."""
    from dg_engine.train.resume import rounding_cost

    _cli(tmp_path, "--steps", "3", "--save-state", str(tmp_path / "state"))
    last = (tmp_path / "run" / "log.csv").read_text().splitlines()[-1].split(",")
    cost = rounding_cost(tmp_path / "state")
    assert cost["weights_dtype"] == "float32"
    assert cost["stored"] == pytest.approx(float(last[8]), abs=1e-4)
    assert cost["bf16"] != cost["stored"] and abs(cost["bf16"] - cost["stored"]) < 0.05
    # The exported model, measured the same way, is the run's last weights: the same loss.
    from dg_engine.train.resume import model_held_out_loss

    assert model_held_out_loss(tmp_path / "state", tmp_path / "model") == pytest.approx(cost["stored"], abs=1e-3)


def test_a_state_from_another_model_is_refused(tmp_path, capsys):
    _cli(tmp_path, "--steps", "2", "--save-state", str(tmp_path / "state"))
    from dg_engine.train.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(["continue", "--minutes", "1", "--state", str(tmp_path / "state"), "--out", str(tmp_path / "run2"),
              "--export", str(tmp_path / "model"), "--size", "small"])
    assert "does not match the run's model" in str(exc.value)


def test_ctrl_c_ends_a_run_as_a_time_limit_would(tmp_path):
    """SIGINT mid-run: the step finishes, then the checkpoint, the export and the state are written."""
    import signal
    import subprocess
    import sys
    import time

    from dg_engine.train.resume import read_state

    cmd = [sys.executable, "-m", "dg_engine.train", "--corpus", "stdlib", "--corpus-limit", "6", "--size", "tiny",
           "--seq-len", "192", "--batch-size", "2", "--warmup", "2", "--val-every", "1000", "--save-every", "1000",
           "--threads", "1", "--no-progress", "--out", str(tmp_path / "run"), "--export", str(tmp_path / "model"),
           "--save-state", str(tmp_path / "state")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = tmp_path / "run" / "log.csv"
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and len(log.read_text().splitlines() if log.exists() else []) < 2:
            time.sleep(0.2)  # the first logged row (step 10) shows that steps are running
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "SIGINT: stopping after this step" in err and "stopped by a signal" in out
    step = read_state(tmp_path / "state")["step"]
    assert step >= 10 and (tmp_path / "run" / f"step_{step:07d}").is_dir()
    assert (tmp_path / "model" / "config.json").is_file()


def test_the_ar_baseline_trains_on_a_runs_data_to_its_token_budget(tmp_path):
    from dg_engine.train.__main__ import main
    from dg_engine.train.resume import read_state

    like = tmp_path / "state"
    _cli(tmp_path, "--steps", "2", "--lr", "3e-3", "--save-state", str(like))
    main(["continue", "--minutes", "5", "--state", str(like), "--out", str(tmp_path / "run"),
          "--export", str(tmp_path / "model"), "--steps", "3", "--threads", "1", "--lr", "1e-3"])
    run = read_state(like)
    assert run["argv"].count("--lr") == 2  # the run's rate changed on the way
    ar = tmp_path / "ar_state"
    options = ["--state", str(ar), "--like", str(like), "--out", str(tmp_path / "ar_run"),
               "--export", str(tmp_path / "ar_model"), "--threads", "1", "--no-progress"]
    main(["baseline", "--minutes", "5", *options])
    first = read_state(ar)
    # Same data and size, the next-token objective, started as the run started, stopped at its tokens.
    assert first["config"]["objective"] == "ar" and first["config"]["size"] == "tiny"
    assert first["config"]["lr"] == 3e-3 and first["config"]["max_tokens"] == run["tokens"]
    per_step = run["tokens"] / run["step"]
    assert run["tokens"] <= first["tokens"] < run["tokens"] + 3 * per_step
    assert (tmp_path / "ar_model" / "model.safetensors").is_file()
    # A larger budget continues the baseline's own state instead of starting again.
    main(["baseline", "--minutes", "5", "--tokens", str(first["tokens"] + 1), *options])
    second = read_state(ar)
    assert second["step"] == first["step"] + 1 and second["config"]["max_tokens"] == first["tokens"] + 1


def test_the_piece_schedule_anneals_before_whichever_limit_comes_first():
    from dg_engine.train.loop import lr_at, piece_share

    cfg = TrainConfig(out="x", lr=1.0, warmup=1, schedule="piece", piece_minutes=10, decay_share=0.5, max_tokens=1000)
    assert piece_share(cfg, 60, tokens=600, first_tokens=200) == pytest.approx(0.5)  # tokens lead time
    assert piece_share(cfg, 540, tokens=300, first_tokens=200) == pytest.approx(0.9)  # time leads tokens
    assert lr_at(10, cfg, 0, piece_share(cfg, 60, 1000, 200)) == pytest.approx(0.1)  # budget spent: annealed
    assert piece_share(TrainConfig(out="x", piece_minutes=10), 300, tokens=10**9, first_tokens=0) == 0.5


def test_a_baseline_that_has_its_budget_says_so_and_trains_nothing(tmp_path, capsys, monkeypatch):
    import json

    import dg_engine.train.__main__ as cli

    state = tmp_path / "ar_state"
    state.mkdir()
    (state / "state.json").write_text(json.dumps(
        {"step": 40, "tokens": 5000, "argv": ["--size", "tiny", "--objective", "ar", "--max-tokens", "5000"]}))
    monkeypatch.setattr(cli, "main", lambda argv: (_ for _ in ()).throw(AssertionError("trained")))
    cli.baseline_run(["--minutes", "1", "--state", str(state), "--tokens", "4000"])
    assert "already has its budget (5,000 of 4,000 tokens)" in capsys.readouterr().out


def test_a_pieces_anneal_is_a_branch_the_run_does_not_continue_from(setup, tmp_path):
    """The trunk (the checkpoint where the anneal began) is what the run resumes from; the annealed
    weights go only to the export. decay_share=1 puts the branch point after the first step."""
    from dg_engine.train.checkpoint import latest_checkpoint, load_export

    tok, src = setup
    options = dict(layout="blocks", schedule="piece", piece_minutes=60, decay_share=1.0)
    _, state = _run(tok, src, tmp_path / "run", steps=4, export=tmp_path / "model", **options)
    assert state["step"] == 4
    trunk = latest_checkpoint(tmp_path / "run")
    assert trunk.name == "step_0000001" and json.loads((trunk / "state.json").read_text())["step"] == 1
    exported, _ = load_export(tmp_path / "model")
    stored = load_file(str(trunk / "weights.safetensors"))
    name = next(n for n, _ in exported.named_parameters() if n in stored)
    assert not torch.equal(dict(exported.named_parameters())[name].detach(), stored[name])
    # The next piece goes on from the trunk: its first logged step is the trunk's next one.
    _run(tok, src, tmp_path / "run", steps=5, **options)
    rows = (tmp_path / "run" / "log.csv").read_text().splitlines()
    steps = [int(r.split(",")[0]) for r in rows[1:]]
    assert steps[:4] == [1, 2, 3, 4] and steps[4] == 2


def test_a_run_to_a_token_budget_keeps_no_trunk():
    from dg_engine.train.loop import keeps_trunk

    assert keeps_trunk(TrainConfig(out="x", schedule="piece", piece_minutes=10))
    assert not keeps_trunk(TrainConfig(out="x", schedule="piece", piece_minutes=10, max_tokens=1000))
    assert not keeps_trunk(TrainConfig(out="x", schedule="cosine", piece_minutes=10))
