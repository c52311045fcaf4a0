"""Averaging the weights of a run's pieces: the mean it writes, the files it keeps, what it refuses."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from dg_engine.tiny import cached_tiny_dir
from dg_engine.train.average import AverageError, average, main
from dg_engine.train.checkpoint import WEIGHTS, load_export


def params(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


@pytest.fixture
def two_points(tmp_path: Path) -> tuple[Path, Path, dict, dict]:
    """The tiny export, and a training state beside it whose every weight is moved by a known step."""
    first = tmp_path / "export"
    shutil.copytree(cached_tiny_dir(), first)
    model, _ = load_export(first)
    a = params(model)
    b = {n: w + 0.01 * (i + 1) for i, (n, w) in enumerate(a.items())}
    state = tmp_path / "state"
    state.mkdir()
    save_file({n: w.contiguous() for n, w in b.items()}, str(state / WEIGHTS))
    return first, state, a, b


def test_the_average_is_the_weighted_mean_and_keeps_the_first_exports_files(two_points, tmp_path):
    first, state, a, b = two_points
    out = tmp_path / "mean"
    average([first, state], out, [1.0, 3.0])
    got = params(load_export(out)[0])
    assert got.keys() == a.keys()
    for name in a:
        torch.testing.assert_close(got[name], 0.25 * a[name] + 0.75 * b[name])
    # Everything but the weights is the first export's, byte for byte.
    for path in first.iterdir():
        if path.name != "model.safetensors":
            assert (out / path.name).read_bytes() == path.read_bytes(), path.name
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no staging folder left behind


def test_equal_weights_by_default_and_the_command_line(two_points, tmp_path, capsys):
    first, state, a, b = two_points
    assert main([str(first), str(state), "--out", str(tmp_path / "mean")]) == 0
    got = params(load_export(tmp_path / "mean")[0])
    name = next(iter(a))
    torch.testing.assert_close(got[name], (a[name] + b[name]) / 2)
    assert "mean of 2 models" in capsys.readouterr().out


def test_sources_that_do_not_fit_are_refused_by_name(two_points, tmp_path, capsys):
    first, state, a, _ = two_points
    name = next(iter(a))
    wrong = tmp_path / "other-size"
    wrong.mkdir()
    save_file({**{n: w.contiguous() for n, w in a.items()}, name: torch.zeros(3, 5)}, str(wrong / WEIGHTS))
    with pytest.raises(AverageError, match=name):
        average([first, wrong], tmp_path / "out")
    with pytest.raises(AverageError, match="first source must be an export"):
        average([state, first], tmp_path / "out")
    with pytest.raises(AverageError, match="neither"):
        average([first, tmp_path], tmp_path / "out")
    with pytest.raises(AverageError, match="as many weights"):
        average([first, state], tmp_path / "out", [1.0])
    assert not (tmp_path / "out").exists()
    assert main([str(first), str(state), "--out", str(tmp_path / "out"), "--weights", "1,x"]) == 2
    assert "average:" in capsys.readouterr().err
