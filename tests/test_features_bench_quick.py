"""The diffusion-feature benchmark's quick mode runs end to end and writes sane figures."""

from __future__ import annotations

import json

from benchmarks import features


def test_features_quick_writes_every_measurement():
    path = features.main(["--quick"])
    data = json.loads(path.read_text())
    assert set(data["syntax_repair"]) >= {"heldout_single_line", "heldout_multi_line", "heldout_random_span"}
    for runs in data["syntax_repair"].values():
        assert 0.0 <= runs["on"]["syntax_ok"] <= 1.0 and 0.0 <= runs["off"]["syntax_ok"] <= 1.0
    for row in data["valid_only"].values():
        # What is shown is the subset of fills the server found error-free, scored on its own.
        shown = row["shown_only"]["counts"]["cases"]
        assert shown == round(row["shown"] * row["all"]["counts"]["cases"])
        assert row["shown_only"]["counts"]["exact"] <= row["all"]["counts"]["exact"]
    assert data["multi_hole"]["cases"] == 2
    assert set(data["multi_hole"]["all_holes_right"]) == {"joint", "one_at_a_time"}
    conf = data["confidence"]
    assert conf["tokens"] > 0 and 0.0 <= conf["wrong_share"] <= 1.0
    assert all(f"threshold_{t}" in conf for t in features.THRESHOLDS)


def test_two_hole_cases_remove_exactly_the_recorded_text():
    from benchmarks.heldout import held_out_files

    for text, holes, removed in features.two_hole_cases(held_out_files(), 5, seed=3):
        (a, _), (b, _) = holes
        restored = text[:a] + removed[0] + text[a:b] + removed[1] + text[b:]
        assert restored.count(removed[0]) >= 1 and restored.count(removed[1]) >= 1
        assert len(restored) == len(text) + len(removed[0]) + len(removed[1])
