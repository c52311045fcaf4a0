"""Data-parallel training on the CPU: ranks share each batch and stay identical."""

from __future__ import annotations

import hashlib
import json
from argparse import Namespace

import pytest
import torch


def test_ranks_share_every_row_once():
    from dg_engine.train.parallel import Ranks

    rows = list(range(8))
    shares = [rows[Ranks(r, 3).share(8)] for r in range(3)]
    assert sorted(x for s in shares for x in s) == rows
    assert Ranks().share(8) == slice(0, None, 1) and Ranks().noise_seed(41) == 41
    assert len({Ranks(r, 2).noise_seed(41) for r in range(2)}) == 2
    with pytest.raises(ValueError, match="cannot be shared"):
        Ranks(0, 4).share(2)


def _gradients(args: Namespace, ranks) -> dict:
    """A rank's gradients of a small linear model on its own input, before and after averaging."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    x = torch.full((1, 3), float(ranks.rank + 1))
    if ranks.rank == 0:
        model(x).sum().backward()
    else:  # the second layer is reached on this rank, the first is not
        model[1](torch.ones(1, 2) * 5).sum().backward()
    own = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    ranks.average_gradients(model)
    after = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    return {"own": own, "after": after}


def _write(path, result) -> None:
    path.write_text(json.dumps({k: [None if g is None else g.tolist() for g in v] for k, v in result.items()}))


def _gradients_to_file(args: Namespace, ranks) -> dict:
    result = _gradients(args, ranks)
    _write(args.folder / f"rank{ranks.rank}.json", result)
    return result


def test_gradients_are_averaged_over_ranks_missing_ones_as_zero(tmp_path):
    from dg_engine.train.parallel import launch

    launch(_gradients_to_file, Namespace(folder=tmp_path), 2)
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    assert r0["after"] == r1["after"]
    for i in range(4):
        mine = [torch.tensor(g) if g is not None else None for g in (r0["own"][i], r1["own"][i])]
        expected = sum(torch.zeros_like(mine[0]) if g is None else g for g in mine) / 2
        assert torch.allclose(torch.tensor(r0["after"][i]), expected), i
    assert r1["own"][0] is None and r0["own"][0] is not None  # rank 1 never reached layer 0


def _train_and_digest(args: Namespace, ranks) -> dict:
    """Three steps of the real loop on this rank's share; the digest of the weights it ends with."""
    from dg_engine.train.loop import TrainConfig, train
    from dg_engine.train.model import build_model
    from dg_engine.train.run import sources, tokenizer_for, training_files

    torch.set_num_threads(1)
    files, cache = training_files(args)
    tokenizer = tokenizer_for(args, files)
    source, _ = sources(args, files, cache, tokenizer, talk=False)
    model = build_model("tiny", len(tokenizer), 0)
    cfg = TrainConfig(out=str(args.folder / "run"), steps=3, batch_size=4, warmup=2, size="tiny", layout="blocks",
                      save_every=1000, val_every=1000, log_every=1)
    state = train(model, tokenizer, source, None, cfg, progress=False, ranks=ranks)
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    (args.folder / f"digest{ranks.rank}").write_text(f"{h.hexdigest()} {state['tokens']}")
    return state


def test_ranks_take_identical_steps(tmp_path):
    from dg_engine.train.__main__ import parse_args
    from dg_engine.train.parallel import launch

    args = parse_args(["--corpus", "stdlib", "--corpus-limit", "6", "--seq-len", "192", "--out", "unused"])
    args.folder = tmp_path
    launch(_train_and_digest, args, 2)
    (d0, t0), (d1, t1) = ((tmp_path / f"digest{r}").read_text().split() for r in range(2))
    assert d0 == d1 and t0 == t1 and int(t0) > 0
    # Rank 0 alone logs: one row per step, tokens from both ranks.
    assert len((tmp_path / "run" / "log.csv").read_text().splitlines()) == 4


def test_two_processes_train_one_model(tmp_path):
    """The command line on two processes: rank 0 alone writes the log, the export and the state."""
    from dg_engine.train.__main__ import main
    from dg_engine.train.resume import read_state

    main(["--corpus", "stdlib", "--corpus-limit", "6", "--size", "tiny", "--seq-len", "192", "--batch-size", "4",
          "--warmup", "2", "--val-every", "2", "--save-every", "2", "--no-progress", "--procs", "2", "--steps", "3",
          "--out", str(tmp_path / "run"), "--export", str(tmp_path / "model"),
          "--save-state", str(tmp_path / "state")])
    state = read_state(tmp_path / "state")
    assert state["step"] == 3 and "--procs" in state["argv"]
    rows = (tmp_path / "run" / "log.csv").read_text().splitlines()
    assert len(rows) == 3  # the header, then steps 2 and 3 (validation), each written once
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_procs_need_an_even_share_and_the_cpu():
    from dg_engine.train.__main__ import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--out", "x", "--procs", "3", "--batch-size", "8"])
    with pytest.raises(SystemExit):
        parse_args(["--out", "x", "--procs", "2", "--layout", "canvas"])
    assert parse_args(["--out", "x", "--procs", "2"]).procs == 2
