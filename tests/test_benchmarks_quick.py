"""Every benchmark's quick mode, so that the benchmarks cannot rot between full runs.

Quick modes use the tiny random model and tiny sizes; these tests check that each one runs end to
end and writes its JSON with the expected keys and sane values (no desyncs, positive speedups,
outputs unchanged by cache reuse), never timings: timings on a loaded CI machine mean nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

pytestmark = pytest.mark.slow


def written(name: str) -> dict:
    data = json.loads((common.RESULTS / f"{name}.quick.json").read_text())
    assert data["benchmark"] == name and data["quick"] is True
    assert {"machine", "model", "settings", "load"} <= data.keys()
    assert data["machine"]["cpu_count"] >= 1
    return data


def sane_summary(s: dict) -> None:
    assert {"n", "p50", "p95", "p99", "mean"} <= s.keys()
    assert 0 <= s["p50"] <= s["p95"] <= s["p99"]


def test_typing_quick():
    from benchmarks import typing

    typing.main(["--quick"])
    data = written("typing")
    assert [r["interval_ms"] for r in data["runs"]] == [50, 150]
    for run in data["runs"]:
        assert run["desyncs"] == 0 and run["errors"] == 0
        assert run["answered"] + run["cancelled"] == run["requests"] == run["edits"] > 0
        assert run["answered"] >= 1  # the last request of a session is never superseded
        assert len(run["latencies_ms"]) == run["answered"]
        sane_summary(run["latency_ms"])
        assert run["cpu_s_per_edit"] > 0


def test_next_edit_quick():
    from benchmarks import next_edit

    next_edit.main(["--quick", "--threads", "1"])
    data = written("next_edit")
    assert data["cases"] == 8 and set(data["kinds"]) == {"rename", "signature", "sibling", "import"}
    for row in data["kinds"].values():
        assert 0 <= row["right"] <= row["shown"] <= row["cases"] == 2
    sane_summary(data["latency_ms"])


def test_lead_quick_scores_every_lead_on_the_same_holes():
    from benchmarks import lead

    lead.main(["--quick", "--leads", "0,3,8,line"])
    data = written("lead")
    overall = {r["lead"]: r for r in data["rows"] if r["kind"] == "all"}
    assert set(overall) == {"0", "3", "8", "line"} and all(r["cases"] == 4 for r in overall.values())
    assert overall["line"]["lead_line"] and overall["line"]["lead_tokens"] == 32 and not overall["8"]["lead_line"]
    for k in overall:  # the kinds split the same four holes
        assert sum(r["cases"] for r in data["rows"] if r["lead"] == k and r["kind"] != "all") == 4
    # Each head token costs one encoder pass on top of the decoder's steps.
    assert overall["8"]["mean_steps"] > overall["0"]["mean_steps"]
    assert data["best"] in overall
    assert len(data["examples"]) == 4 and all({"middle", "lead 0", "lead 8", "lead line"} <= set(e)
                                              for e in data["examples"])


def test_healing_quick_scores_the_same_holes_healed_and_unhealed():
    from benchmarks import healing

    assert healing.main(["--quick", "--lead", "line"]) == 0
    data = written("healing")
    assert data["lead"] == "line" and data["cases"] == 4 and 0 <= data["healable"] <= 4
    overall = {r["healing"]: r for r in data["rows"] if r["kind"] == "all"}
    assert set(overall) == {"healed", "unhealed"} and all(r["cases"] == 4 for r in overall.values())
    for mode in overall:
        assert sum(r["cases"] for r in data["rows"] if r["healing"] == mode and r["kind"] != "all") == 4
    assert all(0 <= r["edit_similarity"] <= 1 and 0 <= r["exact_match"] <= 1 for r in data["rows"])


def test_the_lead_tuner_writes_its_choice_into_the_model_directory(tmp_path):
    import json
    import shutil

    from benchmarks.fixtures import tiny_model_dir
    from dg_engine import EngineConfig, load_engine
    from dg_engine.train import tune_lead

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir(), model)
    report = tmp_path / "report.json"
    assert tune_lead.main(["--model", str(model), "--cases", "3", "--leads", "0,2", "--write",
                           "--report", str(report)]) == 0
    best = json.loads(report.read_text())["best"]
    assert json.loads((model / "lead_config.json").read_text()) == {"lead_tokens": int(best)}
    assert load_engine(EngineConfig(model=str(model), device="cpu")).defaults.lead_tokens == int(best)
    # Only `line` is chosen here: it is written with its cap, and the engine reads both.
    assert tune_lead.main(["--model", str(model), "--cases", "2", "--leads", "line", "--write"]) == 0
    assert json.loads((model / "lead_config.json").read_text()) == {"lead_tokens": 32, "lead_line": True}
    defaults = load_engine(EngineConfig(model=str(model), device="cpu")).defaults
    assert defaults.lead_tokens == 32 and defaults.lead_line and defaults.lead_beam == 1
    # A line from a beam of three: its width is written beside the line lead and read back.
    assert tune_lead.main(["--model", str(model), "--cases", "2", "--leads", "line/3", "--write"]) == 0
    assert json.loads((model / "lead_config.json").read_text()) == {"lead_tokens": 32, "lead_line": True,
                                                                   "lead_beam": 3}
    assert load_engine(EngineConfig(model=str(model), device="cpu")).defaults.lead_beam == 3
    # The user's own width (the `leadBeam` setting, `--lead-beam`) wins over the model's.
    assert load_engine(EngineConfig(model=str(model), device="cpu", lead_beam=1)).defaults.lead_beam == 1
    for bad in ("4,lines", "line/0", "line/x"):
        with pytest.raises(SystemExit):
            tune_lead.main(["--model", str(model), "--leads", bad])


def test_obvious_cases_are_right_python_and_scored_as_written():
    import ast

    from benchmarks import obvious

    for case in obvious.CASES:
        ast.parse(case.before + case.want + case.after)  # the wanted fill makes the file valid
    obvious.main(["--quick"])
    data = written("obvious")
    [model] = data["models"]
    assert [r["case"] for r in model["cases"]] == [c.name for c in obvious.CASES]
    assert model["right"] == sum(r["got"].strip() == r["want"] for r in model["cases"])


def test_prose_quick():
    from benchmarks import prose

    prose.main(["--quick", "--threads", "1"])
    data = written("prose")
    assert data["paragraphs"] == 3 and data["injected_errors"] >= 6
    assert 0 <= data["fixed"] <= 1 and 0 <= data["broken"] <= 1


def test_prose_errors_are_counted_against_the_original():
    import random

    from benchmarks.prose import corrupt, judge

    original = "The parser reads each line and returns the tokens it has found in the order they are written."
    corrupted, injected = corrupt(original, random.Random(3))
    assert injected == 3 and corrupted != original
    untouched = judge(original, corrupted, corrupted)
    assert untouched["errors"] == 3 and untouched["fixed"] == 0 and untouched["broken"] == 0 and untouched["unchanged"]
    repaired = judge(original, corrupted, original)
    assert repaired["fixed"] == 3 and repaired["broken"] == 0
    worse = judge(original, corrupted, corrupted.replace("parser", "reader"))
    assert worse["fixed"] == 0 and worse["broken"] == 1


def test_adapt_split_and_targets():
    from benchmarks.adapt import SINGLE_LINE_KINDS, holes_by_kind, judge, split
    from benchmarks.heldout import cut_holes
    from dg_engine.train.corpus import SourceFile

    files = [SourceFile(f"pkg/m{i}.py", "x = 1\n") for i in range(200)]
    learn, held = split(files)
    assert len(learn) + len(held) == 200 and 0.7 < len(learn) / 200 < 0.9
    assert {f.name for f in split(list(reversed(files)))[1]} == {f.name for f in held}  # order-independent

    # The judge reads the kinds the cutter really gives single-line holes.
    code = "".join(f"def f{i}(a, b):\n    total = a + b * {i}\n    return total\n\n\n" for i in range(40))
    cases = cut_holes([SourceFile("pkg/code.py", code)], {"single_line": 20, "multi_line": 4}, seed=1)
    counts = holes_by_kind(cases)
    single = sum(counts.get(k, 0) for k in SINGLE_LINE_KINDS)
    assert single == 20 and sum(counts.values()) == len(cases)

    def share(exact_single: int) -> dict:
        """Per-kind shares with `exact_single` single-line holes right, spread over the kinds."""
        left, out = exact_single, {}
        for kind in SINGLE_LINE_KINDS:
            right = min(left, counts.get(kind, 0))
            left -= right
            if counts.get(kind):
                out[kind] = right / counts[kind]
        return {"exact_match_by_kind": {**out, "multi_line": 1.0}}

    row = {"holes_by_kind": counts, "before": share(1), "stdlib_before": {"exact_match": 0.3},
           "kinds": {"full": {"after": {**share(3), "exact_match": 0.0}, "stdlib_after": {"exact_match": 0.29}},
                     "lora": {"after": share(2), "stdlib_after": {"exact_match": 0.25}}}}
    judged = judge(row)
    assert judged["full"]["single_line_before"] == 0.05 and judged["full"]["single_line_after"] == 0.15
    assert judged["full"]["single_line_target"] == 0.15 and judged["full"]["single_line_met"] and judged["full"]["stdlib_met"]
    assert judged["lora"]["single_line_after"] == 0.1
    assert not judged["lora"]["single_line_met"] and not judged["lora"]["stdlib_met"]


def test_adapt_quick_runs_projects_side_by_side(tmp_path, monkeypatch):
    # A local stand-in for the first project's wheel, so nothing is downloaded; `--jobs 2` runs the
    # (project, kind) runs in two worker processes, which find it through the same cache folder.
    import zipfile

    from benchmarks import adapt

    name, version = adapt.PROJECTS[0]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    adapt.cache_dir().mkdir(parents=True)
    body = "".join(f"def step_{i}(value, scale):\n    total = value * scale + {i}\n    return total\n\n\n" for i in range(12))
    with zipfile.ZipFile(adapt.cache_dir() / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
        for i in range(10):
            wheel.writestr(f"{name}/part{i}.py", f'"""Part {i}."""\n\n' + body)
        wheel.writestr(f"{name}/tests/test_skip.py", "def test_x():\n    assert True\n")

    adapt.main(["--quick", "--jobs", "2"])
    data = written("adapt")
    assert data["settings"]["jobs"] == 2 and data["settings"]["kinds"] == ["full", "lora"]
    [row] = data["projects"]
    assert row["project"] == f"{name}=={version}" and row["files"]["learn"] + row["files"]["held"] == 10
    assert sum(row["holes_by_kind"].values()) == row["before"]["counts"]["cases"] > 0
    for kind in ("full", "lora"):
        run = row["kinds"][kind]
        assert run["steps"] >= 1 and run["tokens"] > 0 and run["adapter_bytes"] > 0
        assert run["after"]["counts"]["cases"] == row["before"]["counts"]["cases"]
        assert run["stdlib_after"]["counts"]["cases"] == row["stdlib_before"]["counts"]["cases"] > 0
        # The held files' loss is measured with the adapter on, so it moves when the weights do.
        assert 0 < run["held_loss"] < 20 and run["held_loss"] != row["held_loss"]
    assert 0 < row["held_loss"] < 20
    assert set(row["judged"]) == {"full", "lora"}
    # The summary shows the loss before and after each adapter; results written before the field
    # existed still summarise, without those rows.
    from benchmarks.summary import headline_rows

    def loss_rows(result):
        return [r for r in headline_rows({"adapt": result}) if "diffusion loss" in r[1]]

    shown = loss_rows(data)
    assert len(shown) == 2 and shown[0][2] == f"{row['held_loss']:.3f} → {row['kinds']['full']['held_loss']:.3f}"
    older = {**data, "projects": [{**row, "kinds": {k: {f: v for f, v in run.items() if f != "held_loss"}
                                                   for k, run in row["kinds"].items()}}]}
    assert loss_rows(older) == [] and len([r for r in headline_rows({"adapt": older}) if r[0] == "adapt"]) == 6


def test_decode_quick():
    from benchmarks import decode

    decode.main(["--quick"])
    data = written("decode")
    assert data["ar_available"] is True
    for length in data["lengths"]:
        assert length["cases"] >= 1
        d = length["diffusion"]
        sane_summary(d["wall_ms"])
        assert d["tokens_per_forward_mean"] > 0 and d["steps_mean"] >= 1
        assert 0 <= d["exact_match"] <= 1 and 0 <= d["first_line_match"] <= 1
        assert length["speedup"] > 0 and length["ar"]["forward_passes_mean"] >= 1
        profile = length["profile"]
        assert profile["diffusion_ms_per_step"] > 0 and profile["ar_ms_per_step"] > 0
        assert 0 < profile["diffusion_prefill_share"] < 1 and profile["full_canvas_speedup_ceiling"] > 0
    scaling = data["forward_ms_by_canvas_width"]
    assert set(scaling["plain"]) == set(scaling["self_conditioned"]) == {"1", "8", "32", "64"}
    assert all(ms > 0 for ms in scaling["plain"].values())


def test_decode_without_ar_model_skips_the_column(tmp_path, monkeypatch):
    from benchmarks import decode

    # A missing AR baseline is reported in the JSON, not fatal: ar_source says so and loads nothing.
    monkeypatch.setattr(decode, "ar_model_dir", lambda: None)
    path, note = decode.ar_source(decode.parse_args([]))
    assert path is None and "skipped" in note


def test_a_fresh_clone_finds_the_kept_ar_baseline(monkeypatch, tmp_path):
    from benchmarks import fixtures

    kept = fixtures.AR_MODEL_DIRS[-1]
    monkeypatch.setattr(fixtures, "AR_MODEL_DIRS", (tmp_path / "runs" / "ar" / "model", kept))
    assert fixtures.ar_model_dir() == kept
    assert (kept / "model.safetensors").stat().st_size > 1_000_000


def test_kv_reuse_quick():
    from benchmarks import kv_reuse

    kv_reuse.main(["--quick"])
    data = written("kv_reuse")
    for c in data["contexts"]:
        assert c["context_tokens"] > 100 and 0 < c["typed_tokens_encoded"] < 16
        sane_summary(c["cold_ms"])
        sane_summary(c["incremental_ms"])
        assert c["speedup"] > 0
        assert c["fill_matches_without_reuse"] is True
        assert c["kv_max_abs_diff"] < 1e-3
    assert data["fill_matches_without_reuse_fp32"] is True and data["precision"]


def test_memory_quick():
    from benchmarks import memory

    # This interpreter stands in for the serving install, so the second measurement runs anywhere.
    memory.main(["--quick", "--serving-python", sys.executable])
    data = written("memory")
    assert [(r["install"], r["quantization"]) for r in data["runs"]] == [
        ("dev", "none"), ("dev", "int8"), ("serving", "none"), ("serving", "int8")]
    assert data["installs"]["serving"]["python"] == sys.executable
    assert data["installs"]["dev"]["scipy"] == data["installs"]["serving"]["scipy"]
    for run in data["runs"]:
        assert 50 < run["peak_rss_mb"] < 4000 and run["engine_memory_mb"] > 0
        assert run["peak_rss_mb"] >= run["rss_after_load_mb"] * 0.99
    assert data["runs"][1]["engine_memory_mb"] < data["runs"][0]["engine_memory_mb"]  # int8 is smaller
    growth = data["runs"][0]["growth"]
    assert growth["errors"] == 0 and sum(growth["counts"].values()) == (
        growth["initial_requests"] + growth["warmup_requests"] + growth["requests"])
    assert len(growth["samples"]) >= 2 and growth["rss_start_mb"] > 0


def test_gpu_tiny():
    from benchmarks import gpu

    gpu.main(["--tiny"])
    data = written("gpu")
    runs = data["bf16"]["runs"]
    for step in next(iter(runs.values())):
        sane_summary(step["step_ms"])
        assert step["prefill_ms"] > 0
    (extrapolated,) = data["bf16"]["reduced_check"]["extrapolated"]
    assert extrapolated["layers"] == 30 and set(data["bf16"]["reduced_check"]["runs"]) == {"6", "12"}
    assert data["embedded"]["tokens_per_s"] > 0
    loads = data["quantized_loads"]
    assert set(loads) == {"none", "fp8", "nvfp4", "nf4"} and not [k for k, v in loads.items() if "error" in v]
    assert loads["none"]["tv_from_unquantized"] == 0 and 0 < loads["fp8"]["tv_from_unquantized"] < 0.1
    assert loads["nf4"]["weight_bytes"] < loads["none"]["weight_bytes"]


def test_run_and_summary(tmp_path):
    from benchmarks import run, summary

    assert run.main(["--quick", "--only", "kv_reuse", "--no-summary"]) == 0
    path = summary.main(["--quick", "--out", str(tmp_path)])
    text = path.read_text()
    assert "| kv_reuse |" in text and "target" in text
    assert (tmp_path / "kv_reuse.png").stat().st_size > 1000
    # --quick never touches the project's README; --readme puts the table between the markers.
    readme = tmp_path / "README.md"
    readme.write_text("# p\n\nbefore\n<!-- summary:start -->\nold table\n<!-- summary:end -->\nafter\n")
    summary.main(["--quick", "--out", str(tmp_path), "--readme", str(readme)])
    updated = readme.read_text()
    assert "old table" not in updated and "| kv_reuse |" in updated and "# Benchmark summary" not in updated
    assert updated.startswith("# p\n\nbefore\n<!-- summary:start -->\n") and updated.endswith("<!-- summary:end -->\nafter\n")
    assert summary.into_readme(readme, path.read_text()) is False  # already current


def test_every_size_make_bench_uses_is_an_option_of_its_benchmark():
    """`make bench` passes STANDARD's options; a renamed option would only fail at bench time."""
    import importlib

    from benchmarks import run

    assert run.sizes("typing", quick=True, full=False) == ["--quick"]
    assert run.sizes("typing", quick=False, full=True) == []
    for name, argv in run.STANDARD.items():
        assert name in run.OWN + run.OTHERS
        assert run.sizes(name, quick=False, full=False) == argv
        module = importlib.import_module(f"benchmarks.{name}")
        args = module.parse_args(argv)  # argparse exits on an unknown option
        assert not getattr(args, "quick", False)


def test_layouts_quick():
    from benchmarks import layouts

    layouts.main(["--quick"])
    data = written("layouts")
    assert set(data["layouts"]) == {"fim", "pinned", "chat"}
    for sets in data["layouts"].values():
        assert {"single_line", "multi_line", "random_span"} <= set(sets)
        assert all(0 <= v["exact_match"] <= 1 and v["ms_per_fill"] > 0 for v in sets.values())


def test_training_throughput_quick():
    """Both trainers and the data-parallel run are timed, and the record holds what the issue asks."""
    from benchmarks import training_throughput

    training_throughput.main(["--quick", "--procs", "2"])
    data = json.loads((training_throughput.RESULTS.with_name("training_throughput.quick.json")).read_text())
    assert {"old_loss_tokens_per_s", "new_loss_tokens_per_s", "loss_token_share", "model_tflops", "peak_tflops",
            "dtype"} <= data.keys()
    assert data["loss_token_share"] == 1.0 and data["new_config"]["processes"] == 2
    assert data["new_one_process_tokens_per_s"] > 0 and data["details"]["new"]["flops_per_token"] > 0
    assert data["dtype"] in ("bf16", "fp32")
    old, new = data["details"]["old"], data["details"]["new"]
    assert old["flops_per_loss_token"] > old["flops_per_token"]  # the prompt carries no diffusion loss
    assert new["flops_per_loss_token"] == new["flops_per_token"]  # every token of a row does
    assert data["loss_tokens_ratio_at_equal_efficiency"] == old["flops_per_loss_token"] / new["flops_per_loss_token"]
    assert data["min_flops_per_loss_token"] < new["flops_per_loss_token"]
