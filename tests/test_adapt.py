"""Adapters: the file rules, training that stops and resumes, the atomic write, applying the
adapter, and the refusal of one that does not fit (the base model then serves)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from dg_engine import EngineConfig, FillRequest, load_engine
from dg_engine.adapt import default_location
from dg_engine.adapt import adapter as store
from dg_engine.adapt.files import WorkspaceError, select
from dg_engine.adapt.train import AdaptConfig, adapt, add_lora, load_base, tied_linears
from dg_engine.tiny import cached_tiny_dir

CODE = "def area(width, height):\n    return width * height\n\n\ndef perimeter(width, height):\n    return 2 * (width + height)\n"


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q")
    for i in range(3):
        (root / f"shapes{i}.py").write_text(CODE * (i + 1))
    (root / ".env").write_text("TOKEN=abc\n")
    (root / "deploy.pem").write_text("-----BEGIN PRIVATE KEY-----\nxyz\n")
    (root / "settings.py").write_text('API_KEY = "sk-abcdefghijklmnopqrstuvwxyz123456"\n')
    (root / "big.py").write_text("x = 1\n" * 50_000)
    (root / "notes.txt").write_text("not code\n")
    (root / "latin1.py").write_bytes("s = 'caf\xe9'\n".encode("latin-1"))
    (root / "build.py").write_text("generated = True\n")
    (root / ".gitignore").write_text("build.py\n")
    (root / "untracked.py").write_text("never added\n")
    git(root, "add", "shapes0.py", "shapes1.py", "shapes2.py", ".env", "deploy.pem", "settings.py", "big.py",
        "notes.txt", "latin1.py", ".gitignore")
    git(root, "add", "-f", "build.py")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return root


def test_only_tracked_plain_code_is_read(repo: Path):
    s = select(repo)
    assert [f.name for f in s.files] == ["shapes0.py", "shapes1.py", "shapes2.py"]
    assert s.skipped == {"secret-looking name": 2, "token-like content": 1, "too large": 1, "other language": 2,
                         "not UTF-8 text": 1, "ignored by .gitignore": 1}
    with pytest.raises(WorkspaceError, match="not a git repository"):
        select(repo.parent)


def test_adapters_live_in_the_user_cache_keyed_by_the_workspace(repo: Path, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    where = default_location(repo)
    assert where.is_relative_to(tmp_path / "cache") and not where.is_relative_to(repo)
    assert where != default_location(repo.parent) and where.name.startswith("project-")


def test_a_stopped_run_resumes_and_each_run_writes_an_adapter(repo: Path, tmp_path: Path):
    base = cached_tiny_dir()
    files = select(repo)
    cfg = AdaptConfig(minutes=5, batch_size=2, seq_len=192)
    calls = {"n": 0}

    def stop_after_3():
        calls["n"] += 1
        return calls["n"] >= 3

    out, run = tmp_path / "adapter", tmp_path / "run"
    first = adapt(base, files, out, run, cfg, workspace=str(repo), progress=False, should_stop=stop_after_3)
    assert first.steps == 3 and first.kind == "full" and first.files == 3
    calls["n"] = 0
    second = adapt(base, files, out, run, cfg, progress=False, should_stop=stop_after_3)
    assert second.steps == 6  # continued from the checkpoint, not from zero
    tensors, info = store.read(out, store.fingerprint(base))
    assert info.steps == 6 and tensors and all(t.dtype == torch.bfloat16 for t in tensors.values())


def test_a_full_adapter_reproduces_the_trained_weights(repo: Path, tmp_path: Path):
    base = cached_tiny_dir()
    out = tmp_path / "adapter"
    stop = iter([False, False, True])
    adapt(base, select(repo), out, tmp_path / "run", AdaptConfig(batch_size=2, seq_len=192, lr=1e-2), progress=False,
          should_stop=lambda: next(stop))
    model, _ = load_base(base)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    tensors, info = store.read(out, store.fingerprint(base))
    changed = store.apply(model, tensors, info)
    assert changed > 0
    moved = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert sorted(moved) == sorted(tensors)


def test_low_rank_deltas_are_shared_by_the_tied_encoder_and_decoder(tmp_path: Path, repo: Path):
    model, _ = load_base(cached_tiny_dir())
    groups = tied_linears(model)
    # Each layer's linear is one module in the encoder and one in the decoder, on one weight.
    assert all(len(mods) == 2 for name, mods in groups.items() if ".layers." in name)
    assert any(".layers." in name for name in groups)
    deltas = add_lora(model, rank=4)
    name, delta = next(iter(deltas.items()))
    with torch.no_grad():
        delta.B.normal_()
    enc, dec = groups[name]
    assert torch.equal(enc.weight, dec.weight)  # one delta, seen by both
    out = tmp_path / "lora"
    stop = iter([False, True])
    info = adapt(cached_tiny_dir(), select(repo), out, tmp_path / "run-lora", AdaptConfig(kind="lora", rank=4,
                 batch_size=2, seq_len=192), progress=False, should_stop=lambda: next(stop))
    tensors, info = store.read(out, store.fingerprint(cached_tiny_dir()))
    assert info.kind == "lora" and info.rank == 4 and all(k.endswith((".lora_A", ".lora_B")) for k in tensors)
    fresh, _ = load_base(cached_tiny_dir())
    key = next(k for k in tensors if k.endswith(".lora_A"))[: -len(".lora_A")]
    weight = dict(fresh.named_parameters(remove_duplicate=False))[f"{key}.weight"]
    expected = weight.detach() + info.scale * tensors[f"{key}.lora_B"] @ tensors[f"{key}.lora_A"]
    store.apply(fresh, tensors, info)
    assert torch.allclose(weight, expected, atol=1e-6)


def test_the_write_is_atomic(tmp_path: Path, monkeypatch):
    out = tmp_path / "adapter"
    info = store.AdapterInfo(kind="full", base="b1")
    store.write(out, {"w": torch.ones(2)}, info)

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(store, "save_file", broken)
    with pytest.raises(OSError):
        store.write(out, {"w": torch.zeros(2)}, info)
    tensors, kept = store.read(out, "b1")
    assert torch.equal(tensors["w"], torch.ones(2)) and kept.base == "b1"  # the old adapter, whole


def test_a_bad_adapter_is_refused_and_the_base_model_serves(tmp_path: Path):
    base = cached_tiny_dir()
    wrong = tmp_path / "wrong"
    store.write(wrong, {"x": torch.ones(1)}, store.AdapterInfo(kind="full", base="someone-else"))
    with pytest.raises(store.AdapterError, match="another base model"):
        store.read(wrong, store.fingerprint(base))
    misfit = tmp_path / "misfit"
    store.write(misfit, {"lm_head.weight": torch.ones(3, 3)}, store.AdapterInfo(kind="full", base=store.fingerprint(base)))
    corrupt = tmp_path / "corrupt"
    store.write(corrupt, {"x": torch.ones(1)}, store.AdapterInfo(kind="full", base=store.fingerprint(base)))
    (corrupt / store.WEIGHTS).write_bytes(b"\x00" * 10)
    plain = load_engine(EngineConfig(model=str(base)))
    expected = plain.fill(FillRequest("def f(x):\n    return ", "\n")).candidates[0].text
    for bad, reason in ((wrong, "another base model"), (misfit, "does not fit"), (corrupt, "cannot be read"),
                        (tmp_path / "missing", "is not an adapter")):
        engine = load_engine(EngineConfig(model=str(base), adapter=str(bad)))
        assert reason in engine.info()["adapter"]["error"]
        assert engine.fill(FillRequest("def f(x):\n    return ", "\n")).candidates[0].text == expected
