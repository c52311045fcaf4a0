"""The rewrite tuner: its cases, its measure of a local repair, its choice, and the engine reading
the chosen threshold back from the model directory."""

import json
import random

import pytest

from dg_engine import EngineConfig, FillRequest, load_engine
from dg_engine.config import REWRITE_CONFIG, tuned_renoise_below
from dg_engine.train.tune_rewrite import cases_from, choose, misspell, within

SOURCE = '''import os


def newest(paths):
    """The most recently changed of the paths."""
    candidates = [p for p in paths if os.path.exists(p)]
    return max(candidates, key=os.path.getmtime)
'''


@pytest.mark.parametrize("word", ["paths", "candidates", "getmtime", "aabbc"])
def test_a_misspelling_is_never_the_word_and_keeps_its_ends(word):
    for seed in range(50):
        wrong = misspell(word, random.Random(seed))
        assert wrong != word and wrong[0] == word[0] and wrong[-1] == word[-1]
        assert abs(len(wrong) - len(word)) <= 1


def test_cases_are_statements_with_one_misspelt_identifier_in_context():
    cases = cases_from(SOURCE, random.Random(0))
    lines = [c.line for c in cases]
    # The def line ends in ":" and the docstring starts with a quote: neither is a case.
    assert lines == ["candidates = [p for p in paths if os.path.exists(p)]",
                     "return max(candidates, key=os.path.getmtime)"]
    for case in cases:
        assert SOURCE == case.prefix + case.line + case.suffix
        assert case.prefix.endswith("    ") and case.typo != case.line
        start, end = case.span
        # Outside the misspelt word the typo line is the line itself.
        assert case.typo[:start] == case.line[:start]
        assert case.typo[end:] == case.line[len(case.line) - (len(case.typo) - end):]


def test_a_repair_counts_as_local_only_inside_the_word():
    typo = "return max(candidtes, key=len)"
    span = (11, 20)
    assert within(typo, "return max(candidates, key=len)", span)
    assert not within(typo, typo, span)  # nothing changed
    assert not within(typo, "return min(candidates, key=len)", span)  # a correct word changed too


def result(threshold, kept, repaired, localized, cases=40):
    return {"renoise_below": threshold, "kept": kept, "repaired": repaired, "localized": localized, "cases": cases}


def test_correct_lines_come_first_then_the_most_typos_changed_in_place():
    results = [result(0.1, 0.75, 0.0, 0.15), result(0.3, 0.75, 0.0, 0.20), result(0.5, 0.725, 0.05, 0.30),
               result(0.7, 0.60, 0.10, 0.35)]
    # 0.5 keeps one line fewer than the best (a tie on 40 lines) and changes the most typos;
    # 0.7 changes more but breaks six more correct lines.
    assert choose(results)["renoise_below"] == 0.5
    assert choose([result(0.1, 0.8, 0.0, 0.1), result(0.2, 0.8, 0.0, 0.1)])["renoise_below"] == 0.1


def test_the_engine_reads_the_tuned_threshold_and_a_request_overrides_it(tiny_dir, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for f in tiny_dir.iterdir():
        (model / f.name).write_bytes(f.read_bytes())
    (model / REWRITE_CONFIG).write_text(json.dumps({"renoise_below": 0.37}))
    engine = load_engine(EngineConfig(model=str(model), device="cpu"))
    assert engine.defaults.renoise_below == 0.37
    assert engine.options(FillRequest("x = ", "\n", seed_text="1")).renoise_below == 0.37
    assert engine.options(FillRequest("x = ", "\n", seed_text="1", renoise_below=0.05)).renoise_below == 0.05
    untuned = load_engine(EngineConfig(model=str(tiny_dir), device="cpu"))
    assert untuned.defaults.renoise_below == 0.2


@pytest.mark.parametrize("content", ['{"renoise_below": 1.5}', '{"renoise_below": "high"}', "{}", "not json"])
def test_an_unusable_rewrite_config_falls_back_to_the_default_with_a_message(tmp_path, content, caplog):
    (tmp_path / REWRITE_CONFIG).write_text(content)
    assert tuned_renoise_below(tmp_path) == 0.2
    assert REWRITE_CONFIG in caplog.text
