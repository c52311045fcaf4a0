"""The hole-by-hole comparison that decides whether a piece's end ships."""

import json

import pytest

from dg_engine.train.paired import (fingerprint, paired_comparison, per_case_record, read_per_case, sign_test_p,
                                    verdict, write_per_case)

MIDDLES = [f"x = {i}" for i in range(40)]


def scores(exact, similarity, middles=MIDDLES):
    return {"holes": fingerprint(middles), "exact": exact, "similarity": similarity}


def test_sign_test_matches_the_binomial_by_hand():
    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(3, 3) == 1.0
    # 6 wins, 0 losses: 2 * (1/2)^6.
    assert sign_test_p(6, 0) == pytest.approx(2 / 64)
    # 5 against 1: 2 * (1 + 6) / 64.
    assert sign_test_p(1, 5) == pytest.approx(14 / 64)


def test_a_uniform_gain_on_every_hole_is_better():
    old = scores([0] * 40, [0.3] * 40)
    new = scores([0] * 40, [0.35] * 40)
    result = paired_comparison(new, old)
    assert result["similarity_gain"] == pytest.approx(0.05)
    assert result["similarity_ci95"][0] > 0
    assert result["verdict"] == "better"
    assert paired_comparison(old, new)["verdict"] == "worse"


def test_totals_that_differ_by_one_lucky_hole_are_a_tie():
    # Each model gets a different hole right, and the similarities swap around: no direction.
    old_sim = [0.2 + 0.01 * (i % 7) for i in range(40)]
    new_sim = [0.2 + 0.01 * ((i + 3) % 7) for i in range(40)]
    old = scores([1 if i == 0 else 0 for i in range(40)], old_sim)
    new = scores([1 if i in (1, 2) else 0 for i in range(40)], new_sim)
    result = paired_comparison(new, old)
    assert (result["exact_wins"], result["exact_losses"]) == (2, 1)
    assert result["similarity_ci95"][0] < 0 < result["similarity_ci95"][1]
    assert result["verdict"] == "tie"


def test_more_exact_losses_than_wins_never_ship():
    assert verdict(wins=1, losses=4, low=0.001, high=0.02) == "tie"
    assert verdict(wins=4, losses=4, low=0.001, high=0.02) == "better"


def test_significantly_more_exact_matches_decide_unless_the_similarity_is_significantly_worse():
    assert verdict(wins=7, losses=0, low=-0.01, high=0.016) == "better"  # the sign test: p = 0.016
    assert verdict(wins=0, losses=7, low=-0.016, high=0.01) == "worse"
    assert verdict(wins=7, losses=0, low=-0.03, high=-0.001) == "tie"  # the similarities disagree
    assert verdict(wins=5, losses=1, low=-0.01, high=0.016) == "tie"  # p = 0.22: not significant


def test_scores_from_other_holes_are_refused():
    old = scores([0] * 40, [0.3] * 40)
    other = scores([0] * 40, [0.3] * 40, middles=[m + " " for m in MIDDLES])
    with pytest.raises(ValueError, match="different holes"):
        paired_comparison(other, old)


def test_per_case_file_round_trip_and_a_broken_one(tmp_path):
    path = tmp_path / "holes.json"
    write_per_case(path, per_case_record(MIDDLES, [True] + [False] * 39, [1.0] + [0.123456] * 39))
    record = read_per_case(path)
    assert record["holes"] == fingerprint(MIDDLES)
    assert record["exact"][:2] == [1, 0] and record["similarity"][1] == 0.1235
    path.write_text(json.dumps({"holes": "x", "exact": [1, 0], "similarity": [0.5]}))
    with pytest.raises(ValueError, match="not a per-hole score file"):
        read_per_case(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a per-hole score file"):
        read_per_case(path)


def test_score_compares_a_model_with_its_own_per_hole_scores(tiny_dir, tmp_path, capsys):
    from dg_engine.train import score

    holes = tmp_path / "holes.json"
    assert score.main(["--model", str(tiny_dir), "--cases", "3", "--per-case", str(holes)]) == 0
    assert len(read_per_case(holes)["exact"]) == 3
    capsys.readouterr()
    # The same model on the same holes with the same seeds: no gain, and so a tie.
    assert score.main(["--model", str(tiny_dir), "--cases", "3", "--against", str(holes)]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["paired"]["similarity_gain"] == 0 and row["paired"]["verdict"] == "tie"
    # Other holes are refused before any scoring.
    with pytest.raises(SystemExit):
        score.main(["--model", str(tiny_dir), "--cases", "2", "--against", str(holes)])
    assert "measured on other holes" in capsys.readouterr().err
