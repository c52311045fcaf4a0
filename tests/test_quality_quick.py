"""The quality benchmark: its metric code on hand-made cases, and a quick end-to-end run.

The benchmark's figures are only as good as its scoring, so the scoring is checked on cases whose
answers are known: exact match and edit similarity, the pass@1 sandbox (a correct middle passes,
a wrong one fails, an endless loop times out, a socket connection is refused), the held-out hole
cutter, and the trivial baselines. The quick run uses the tiny random model as both the diffusion
and the AR model and checks the structure of the JSON it writes; its canonical-middle reference
row must pass every test it runs, which is what proves that cases are assembled correctly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import quality  # noqa: E402
from benchmarks.heldout import cut_holes, held_out_files  # noqa: E402
from benchmarks.quality_systems import previous_line  # noqa: E402
from benchmarks.humaneval import Case, data_dir, load_cases, run_program  # noqa: E402
from dg_engine.train.corpus import HELD_OUT  # noqa: E402

METRICS = {"exact_match", "edit_similarity", "syntax_ok", "counts"}


def test_exact_match_ignores_trailing_whitespace_only():
    assert quality.exact_match("    x = 1   \n\n", "    x = 1")
    assert quality.exact_match("a\r\nb", "a  \nb")
    assert not quality.exact_match("x = 1", "    x = 1")  # indentation counts
    assert not quality.exact_match("x = 2", "x = 1")


def test_edit_similarity():
    assert quality.levenshtein("kitten", "sitting") == 3
    assert quality.levenshtein("", "abc") == 3
    assert quality.edit_similarity("abc", "abd") == pytest.approx(2 / 3, abs=1e-3)
    assert quality.edit_similarity("", "") == 1.0
    assert quality.edit_similarity("", "abc") == 0.0
    assert quality.edit_similarity("x = 1  \n", "x = 1") == 1.0


def test_sandbox_passes_fails_times_out_and_blocks_sockets():
    program = "def add(a, b):\n{}\n\ndef check(f):\n    assert f(2, 3) == 5\n\ncheck(add)\n"
    assert run_program(program.format("    return a + b")).status == "passed"
    assert run_program(program.format("    return a - b")).status == "failed"
    assert run_program(program.format("    while True:\n        pass"), timeout=1).status == "timeout"
    blocked = run_program("import socket\nsocket.create_connection(('127.0.0.1', 9))\n")
    assert blocked.status == "failed" and "network access is disabled" in blocked.detail
    raw = run_program("import _socket\ns = _socket.socket()\ns.connect(('127.0.0.1', 9))\n")
    assert raw.status == "failed" and "network access is disabled" in raw.detail


def test_offered_texts_count_when_any_of_them_is_right():
    """A user cycling through the editor's suggestions finds the right one if any is right: the
    offered share counts a case once, whichever of its texts is exact or passes."""
    from benchmarks.humaneval import Executor

    program = "def add(a, b):\n    return {}\n"
    test = "assert add(2, 3) == 5\n"
    cases = [Case("he_single_line", f"t/{i}", "single_line", program.format(""), len(program.format("")) - 1, "a + b", test)
             for i in range(3)]
    shown = ["a - b", "a + b", "b"]
    offered = [["a - b", "a + b"], ["a + b"], ["b", "a * b"]]
    metrics = quality.score(cases, shown, Executor(5.0, 2), offered)
    assert metrics["exact_match"] == pytest.approx(1 / 3, abs=1e-3) and metrics["pass_at_1"] == pytest.approx(1 / 3, abs=1e-3)
    assert metrics["exact_in_offered"] == pytest.approx(2 / 3, abs=1e-3) and metrics["pass_in_offered"] == pytest.approx(2 / 3, abs=1e-3)
    assert metrics["offered_per_case"] == pytest.approx(5 / 3, abs=1e-3)
    # One text per case (a single candidate) adds nothing.
    assert "exact_in_offered" not in quality.score(cases, shown, None, [[t] for t in shown])


def test_syntax_errors_and_previous_line_baseline():
    assert quality.syntax_errors("def f():\n    return 1\n") == 0
    assert quality.syntax_errors("def f(:\n    return 1\n") > 0
    text = "def f(x):\n    y = x + 1\n\n    return y\n"
    fresh = Case("t", "fresh", "whole_line", text, text.index("\n    return") + 1, "")
    assert previous_line(fresh) == "    y = x + 1"
    lines = "total = a + b\ncount = "
    rest = Case("t", "rest", "rest_of_line", lines, len(lines), "")
    assert previous_line(rest) == "a + b"


def test_heldout_holes_are_deterministic_and_held_out():
    files = held_out_files()
    counts = {"single_line": 4, "multi_line": 3, "random_span": 3}
    first, second = cut_holes(files, counts, seed=1), cut_holes(files, counts, seed=1)
    assert [(c.id, c.middle) for c in first] == [(c.id, c.middle) for c in second]
    assert len(first) == 10 and all(c.middle.strip() for c in first)
    assert all(c.id.rsplit(":", 1)[0] in HELD_OUT for c in first)
    for case in first:
        source = next(f.text for f in files if f.name == case.id.rsplit(":", 1)[0])
        assert case.original == source


@pytest.mark.skipif(data_dir() is None, reason="HumanEval-Infilling data not present")
def test_humaneval_line_cases_keep_the_program_text():
    case = load_cases("he_single_line", 1)[0]
    assert not case.middle.endswith("\n") and case.text[case.offset] == "\n"
    assert case.original.count("\n") == case.text.count("\n")


def test_quick_run_writes_the_expected_json(tiny_dir, tmp_path):
    argv = ["--quick", "--model", str(tiny_dir), "--ar-model", str(tiny_dir), "--threads", "1", "--jobs", "1",
            "--out-dir", str(tmp_path)]
    path = quality.main(argv)
    payload = json.loads(Path(path).read_text())
    assert payload["benchmark"] == "quality" and payload["quick"] is True
    assert {"machine", "models", "settings", "sets", "targets", "training", "timing_s"} <= payload.keys()
    assert payload["models"]["embedded"]["parameters"] > 0 and payload["models"]["ar"] is not None
    expected = {"heldout_single_line", "heldout_multi_line", "heldout_random_span"}
    if data_dir() is not None:
        expected |= {"he_single_line", "he_multi_line", "he_random_span"}
    else:
        assert set(payload["skipped_sets"]) == {"he_single_line", "he_multi_line", "he_random_span"}
    assert set(payload["sets"]) == expected
    for name, result in payload["sets"].items():
        assert result["cases"] == (3 if name.startswith("he_") else 1)
        systems = result["systems"]
        assert set(systems) == {"embedded_n1", "embedded_n4", "ar_greedy", "empty", "previous_line", "canonical"}
        for system in systems.values():
            for variant in ("processed", "raw"):
                metrics = system[variant]
                assert METRICS <= metrics.keys()
                assert all(0.0 <= metrics[k] <= 1.0 for k in ("exact_match", "edit_similarity", "syntax_ok"))
                assert ("pass_at_1" in metrics) == name.startswith("he_")
            assert system["latency_ms"]["n"] == result["cases"]
        reference = systems["canonical"]["raw"]
        assert reference["exact_match"] == 1.0 and reference["syntax_ok"] == 1.0
        if name.startswith("he_"):
            assert reference["pass_at_1"] == 1.0
        if name == "he_single_line":
            assert systems["empty"]["raw"]["exact_match"] == 0.0
    assert (tmp_path / "quality.quick.md").read_text().startswith("# Fill quality")
    assert (tmp_path / "quality_quick_exact_match.png").stat().st_size > 0


def _metrics(es: float, exact: float = 0.0, syntax: float = 1.0, cases: int = 10) -> dict:
    return {"exact_match": exact, "edit_similarity": es, "syntax_ok": syntax, "counts": {"cases": cases}}


def test_targets_hold_each_set_to_the_previous_line_and_the_bar_to_the_issue():
    results = {
        "heldout_multi_line": {"systems": {"embedded_n1": {"processed": _metrics(0.18), "raw": _metrics(0.1)},
                                           "previous_line": {"processed": _metrics(0.19)}}},
        "heldout_single_line": {"systems": {"embedded_n1": {"processed": _metrics(0.3, exact=0.25, syntax=0.7),
                                                            "raw": _metrics(0.3)},
                                            "previous_line": {"processed": _metrics(0.2)}}},
    }
    found = {(t["target"], t["system"], t["variant"]): t for t in quality.targets(results)}
    below = found[("heldout_multi_line edit similarity above the previous line's", "embedded_n1", "processed")]
    above = found[("heldout_single_line edit similarity above the previous line's", "embedded_n1", "processed")]
    assert (below["met"], below["threshold"], above["met"]) == (False, 0.19, True)
    assert found[("held-out single-line exact match", "embedded_n1", "processed")]["met"] is True
    assert found[("held-out multi-line edit similarity", "embedded_n1", "processed")]["met"] is False
    # Syntax is pooled over every set: (0.7 x 10 + 1.0 x 10) / 20 = 0.85 passes the 0.8 bar.
    assert found[("fills adding no syntax error (all sets)", "embedded_n1", "processed")]["value"] == 0.85
    assert not any(t["system"] == "embedded_n4" for t in found.values())


def test_the_summary_shows_a_comparison_as_its_own_bar():
    from benchmarks.summary import other_rows

    targets = [{"target": "a set edit similarity above the previous line's", "system": "embedded_n1",
                "variant": "processed", "value": 0.2, "threshold": 0.19, "bar": "> 0.19 (previous_line)", "met": True},
               {"target": "pass@1", "system": "embedded_n1", "variant": "processed", "value": 0.07, "threshold": 0.1,
                "met": False}]
    rows = other_rows("quality", {"targets": targets})
    assert [(r[3], r[4]) for r in rows] == [("> 0.19 (previous_line)", True), ("≥ 0.1", False)]


def test_the_summary_names_the_host_of_each_benchmark():
    from benchmarks.summary import render

    def result(cpu_model: str) -> dict:
        return {"machine": {"cpu_count": 2, "cpu_model": cpu_model, "date": "2026-12-08"}, "model": "embedded"}

    text = render({"reliability": result("AMD EPYC"), "quality": result("Intel Xeon")}, False)
    header = next(line for line in text.splitlines() if line.startswith("Machine:"))
    assert "(AMD EPYC" in header and header.endswith("On Intel Xeon: `quality`.")
    assert "- `quality` (2026-12-08, Intel Xeon)" in text and "- `reliability` (2026-12-08, AMD EPYC)" in text
    older = render({"quality": result("Intel Xeon"), "reliability": {"machine": {"cpu": "x86_64"}}}, False)
    assert "CPU model not recorded: `reliability`." in older
    alone = render({"quality": result("Intel Xeon")}, False)
    assert next(line for line in alone.splitlines() if line.startswith("Machine:")).endswith("GPU none.")
