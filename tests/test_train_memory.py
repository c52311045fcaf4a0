"""The memory guard: a training run short of memory stops as at a time limit instead of thrashing."""

from __future__ import annotations

from dg_engine.train.loop import MemoryGuard, any_of


def meminfo(tmp_path, available_kb: int, total_kb: int = 24_000_000):
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       {total_kb} kB\nMemFree:        1000 kB\nMemAvailable:   {available_kb} kB\n")
    return str(path)


def test_it_stops_only_when_little_memory_is_left_and_says_so_once(tmp_path):
    said = []
    plenty = MemoryGuard(said.append, meminfo=meminfo(tmp_path, 12_000_000))
    assert plenty() is False and plenty.available() == (12_000_000, 24_000_000) and not said
    short = MemoryGuard(said.append, meminfo=meminfo(tmp_path, 900_000))  # under 6% of 24 GB
    assert short() is True and short() is True
    assert len(said) == 1 and "878 MB of 23,437 MB left" in said[0] and "continue" in said[0]


def test_a_machine_that_does_not_say_never_stops_the_run(tmp_path):
    assert MemoryGuard(meminfo=str(tmp_path / "missing"))() is False
    (tmp_path / "odd").write_text("MemTotal: lots\n")
    assert MemoryGuard(meminfo=str(tmp_path / "odd"))() is False


def test_any_of_asks_every_check_and_skips_absent_ones():
    asked = []

    def check(name, answer):
        def ask():
            asked.append(name)
            return answer
        return ask

    assert any_of(None, check("signals", True), check("memory", False))() is True
    assert asked == ["signals", "memory"]  # the second is still asked, so it can log its own reason
    assert any_of(None)() is False


def test_a_run_short_of_memory_ends_with_its_checkpoint_export_and_state(tmp_path, monkeypatch, capsys):
    from dg_engine.train.__main__ import main
    from dg_engine.train.resume import read_state

    monkeypatch.setattr(MemoryGuard, "available", lambda self: (500_000, 24_000_000))
    main(["--corpus", "stdlib", "--corpus-limit", "6", "--size", "tiny", "--seq-len", "192", "--batch-size", "2",
          "--warmup", "2", "--steps", "50", "--threads", "1", "--no-progress", "--out", str(tmp_path / "run"),
          "--export", str(tmp_path / "model"), "--save-state", str(tmp_path / "state")])
    assert read_state(tmp_path / "state")["step"] == 1  # stopped after the step it was in
    assert (tmp_path / "model" / "model.safetensors").is_file()
    err = capsys.readouterr()
    assert "stopping after this step" in err.err and "stopped short of memory" in err.out
