"""The sampler tuner's choice among measured settings."""

from dg_engine.train.tune import SIMILARITY_TIE, choose


def setting(exact, similarity, steps, name, cases=None):
    result = {"exact_match": exact, "edit_similarity": similarity, "mean_steps": steps, "name": name}
    return result if cases is None else {**result, "cases": cases}


def test_exact_match_comes_first():
    results = [setting(0.0, 0.9, 2, "similar"), setting(0.1, 0.2, 9, "exact")]
    assert choose(results)["name"] == "exact"


def test_within_noise_of_the_best_similarity_the_fewest_steps_win():
    results = [setting(0.0, 0.1657, 6.4, "best by a hair"), setting(0.0, 0.1656, 5.3, "faster"),
               setting(0.0, 0.1657 - SIMILARITY_TIE / 2, 5.1, "fastest, still close"),
               setting(0.0, 0.1657 - 2 * SIMILARITY_TIE, 3.0, "fast but worse")]
    assert choose(results)["name"] == "fastest, still close"


def test_a_clearly_better_similarity_beats_speed():
    results = [setting(0.0, 0.30, 8.0, "better"), setting(0.0, 0.15, 4.0, "faster")]
    assert choose(results)["name"] == "better"


def test_one_lucky_hole_is_not_a_better_setting():
    # One exact match in 80 holes is a tie; the clearly better similarity decides.
    results = [setting(0.0, 0.1754, 6.1, "similar", 80), setting(1 / 80, 0.1682, 7.9, "one lucky hole", 80)]
    assert choose(results)["name"] == "similar"
    # Three in 80 is more than luck.
    results = [setting(0.0, 0.1754, 6.1, "similar", 80), setting(3 / 80, 0.1682, 7.9, "exact", 80)]
    assert choose(results)["name"] == "exact"
