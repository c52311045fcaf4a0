"""The memory guard: a training run short of memory stops as at a time limit instead of thrashing."""

from __future__ import annotations

from dg_engine.train.heap import HeapTrimmer
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


HOLES = r"""
import json, sys
import numpy as np
from dg_engine.train.heap import keep_freed_memory, release_freed_memory

def anonymous_kb():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Anonymous:"):
            return int(line.split()[1])

assert keep_freed_memory()
# Blocks of 0.5-4 MB from the heap (under the 1 GB mmap threshold), every other one freed and the last
# kept, so that the free memory is in holes below the top of the heap, where no trim threshold reaches.
blocks = [np.ones((1 + i % 8) * 2**16) for i in range(100)]  # 8-byte floats: 0.5-4 MB each
del blocks[::2]
before = anonymous_kb()
released = release_freed_memory()
print(json.dumps({"before": before, "after": anonymous_kb(), "released": released, "kept": len(blocks)}))
"""


def test_trimming_hands_the_holes_of_a_kept_heap_back_to_the_kernel():
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", HOLES], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    freed_kb = 50 * 2 * 2**10  # the freed half: 50 blocks of 0.5, 1.5, 2.5 and 3.5 MB, 2 MB on average
    assert got["released"] is True
    assert got["before"] - got["after"] > 0.8 * freed_kb, got


def test_the_heap_is_trimmed_every_few_steps_only_while_memory_is_short(tmp_path):
    released = []
    trim = HeapTrimmer(every=10, meminfo=meminfo(tmp_path, 12_000_000), release=lambda: released.append(1) or True)
    assert [trim(step) for step in (10, 20, 30)] == [False] * 3 and not released  # half is free
    trim.meminfo = meminfo(tmp_path, 6_000_000)  # a quarter free: under the 30% it trims below
    assert [trim(step) for step in range(1, 31)].count(True) == 3 and len(released) == 3 == trim.trims
    trim.meminfo = str(tmp_path / "missing")
    assert trim(40) is False and len(released) == 3
