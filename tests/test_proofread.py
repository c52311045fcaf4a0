"""Proofreading prose: the candidate rules, the model as judge, and the paragraph command's path."""

from __future__ import annotations

import pytest
import torch

from dg_engine import EngineConfig, load_engine
from dg_engine.lexicon import Lexicon, load, parse, render
from dg_engine.proofread import Edit, Margins, candidates, choose, gains, log_likelihoods
from dg_lsp.documents import Snapshot
from dg_lsp.fill import FillJob, run_fill
from dg_lsp.settings import Settings

LEXICON = parse("the 100\nvalue 40\nequal 30\nvalues 5\nequals 4\nsquad 2\nnot a word\n7 x\n")


def kinds(paragraph: str, lexicon: Lexicon = LEXICON, known=frozenset()) -> set[tuple[str, str, str]]:
    return {(e.kind, paragraph[e.start : e.end], e.text) for e in candidates(paragraph, lexicon, known)}


def test_the_lexicon_parses_counts_and_finds_known_neighbours_most_frequent_first():
    assert LEXICON.counts == {"the": 100, "value": 40, "equal": 30, "values": 5, "equals": 4, "squad": 2}
    assert parse(render(LEXICON.counts)) == LEXICON
    assert LEXICON.neighbours("eqal") == ["equal"]
    assert LEXICON.neighbours("vlaue") == ["value"]  # two letters swapped
    assert LEXICON.neighbours("valuee") == ["value", "values"]  # a letter doubled: the commoner first
    assert LEXICON.neighbours("value") == ["values"]  # never the word itself


def test_the_package_ships_a_lexicon_of_documentation_words():
    shipped = load()
    assert len(shipped.counts) > 10_000
    assert all(shipped.known(w) for w in ("the", "iterable", "namespace", "returns"))
    assert not shipped.known("availabel")


def test_a_missing_lexicon_file_gives_an_empty_one(tmp_path):
    empty = load(tmp_path / "absent.txt")
    assert empty.counts == {}
    assert kinds("It is eqal to the the value.", empty) == {("agreement", "is", "are"), ("doubled", "the ", "")}


def test_typos_are_unknown_words_one_edit_from_a_known_one():
    assert ("typo", "eqal", "equal") in kinds("It is eqal.")
    assert ("typo", "Eqal", "Equal") in kinds("Eqal it is.")  # the case is kept
    # Names, code, links and the writer's own words are not typos.
    for text in ("Call eqal_fn now.", "Use os.eqal here.", "Set `eqal` first.", "See [eqal](x) too.",
                 "The EQAL flag.", "The eqAl name.", "Visit http://eqal.org now."):
        assert not any(k == "typo" for k, _, _ in kinds(text)), text
    assert not any(k == "typo" for k, _, _ in kinds("It is eqal.", known=frozenset({"eqal"})))
    assert kinds("Two squads.") == set()  # the plural of a known word
    # Prose the lexicon mostly does not know is not spelt wrong: no typo is proposed in it.
    assert kinds("Der Wert ist eqal.") == set()
    assert any(k == "typo" for k, _, _ in kinds("The value is eqal to the values."))
    assert not any(k == "typo" for k, _, _ in kinds("The vaule is eqal to the valeus."))  # three of five unknown
    assert not any(k == "typo" for k, _, _ in kinds("Eqal eqal eqal the value."))  # counted by occurrence


def test_a_long_paragraph_keeps_every_rule_candidate_when_typos_are_cut():
    lexicon = parse("".join(f"{w} 5\n" for w in ("value", "valve", "vague", "the", "and", "end")))
    text = " ".join(["The value of the valve and the vaue."] * 40) + " It are the the end."
    found = candidates(text, lexicon)
    assert len(found) == 64 and sum(e.kind == "typo" for e in found) == 62
    assert {e.kind for e in found} == {"typo", "agreement", "doubled"}


def test_articles_are_swapped_only_before_a_word():
    assert ("article", "a", "an") in kinds("It is a error.")
    assert ("article", "An", "A") in kinds("An value.")
    assert not any(k == "article" for k, _, _ in kinds("Option a, or b; see (a) and a."))


def test_agreement_and_doubled_words_across_a_wrapped_comment_line():
    found = kinds("The value is\n# is equal to the\n# the other.")
    assert ("agreement", "is", "are") in found
    assert ("doubled", "the ", "") in found  # the second twin and its space: the line keeps its prefix
    assert ("doubled", "is ", "") in found
    assert not any(k == "doubled" for k, _, _ in kinds("The value is. Is it?"))


def test_choose_keeps_the_best_edit_of_each_place_over_its_margin():
    edits = [Edit(0, 4, "equal", "typo"), Edit(0, 4, "equals", "typo"), Edit(5, 7, "are", "agreement"),
             Edit(8, 12, "", "doubled")]
    kept = choose(edits, [7.0, 9.0, 0.5, -0.1], Margins(typo=6.0, agreement=0.0, doubled=0.0))
    assert [(e.text, e.gain) for e in kept] == [("equals", 9.0), ("are", 0.5)]
    assert choose(edits, [5.9, 5.0, 0.0, 0.0], Margins(typo=6.0)) == []


def test_scores_are_causal_so_a_row_padded_by_longer_ones_scores_the_same(tiny):
    model, _ = tiny
    short, long = [5, 6, 7], [5, 6, 7, 8, 9, 10, 11]
    alone = log_likelihoods(model, [2, 3], [short])[0]
    batched = log_likelihoods(model, [2, 3], [long, short])
    assert batched[1] == pytest.approx(alone, abs=1e-4)
    assert batched[0] < batched[1]  # more tokens, more (negative) log-likelihood
    with pytest.raises(ValueError):
        log_likelihoods(model, [], [short])  # the first token needs something before it
    rows = [long, short, [9], long[::-1]]
    assert log_likelihoods(model, [2, 3], rows, chunk=1) == pytest.approx(log_likelihoods(model, [2, 3], rows), abs=1e-4)
    with torch.inference_mode():
        logits = model.lm_head(model.model.encoder(input_ids=torch.tensor([[2, 3, 5]])).last_hidden_state).float()
    cap = model.config.text_config.final_logit_softcapping
    logits = torch.tanh(logits / cap) * cap if cap is not None else logits
    first = float(logits[0, 1].log_softmax(-1)[5])
    assert log_likelihoods(model, [2, 3], [[5]])[0] == pytest.approx(first, abs=1e-4)


def test_gains_are_each_variants_score_less_the_originals(tiny):
    model, _ = tiny
    original = [5, 6, 7, 8, 9, 10]
    variants = [[5, 6, 70, 8, 9, 10], [50, 6, 7, 8, 9, 10], [5, 6, 7, 8, 9], original]
    whole = log_likelihoods(model, [2, 3], [original] + variants)
    assert gains(model, [2, 3], original, variants, chunk=2) == pytest.approx([w - whole[0] for w in whole[1:]], abs=1e-4)
    assert gains(model, [2, 3], original, variants)[-1] == pytest.approx(0.0, abs=1e-6)


@pytest.fixture(scope="module")
def embedded():
    return load_engine(EngineConfig(model="embedded", device="cpu", dtype="float32", quantization="none"))


def test_the_shipped_model_fixes_a_typo_an_agreement_error_and_a_doubled_word(embedded):
    wrong = ("The function returns the number of items in the queue. If the queue are empty, the the "
             "call blocks until a item is availabel or the timeout expires.")
    right = ("The function returns the number of items in the queue. If the queue is empty, the "
             "call blocks until an item is available or the timeout expires.")
    fixed, edits = embedded.proofread(wrong)
    assert fixed == right, edits
    assert {e.kind for e in edits} == {"typo", "agreement", "doubled", "article"}
    assert embedded.proofread(right) == (right, [])


def paragraph_fill(engine, text: str, start: int, end: int, language: str, instruction=None):
    uri = "file:///notes." + ("md" if language == "markdown" else "py")
    job = FillJob(Snapshot(uri, 1, language, text), start, end, "paragraph", Settings(), instruction=instruction)
    return run_fill(engine, job, None)


def test_a_comment_block_is_proofread_in_place_and_the_documents_own_words_are_kept(embedded):
    code = ("def drain(queue):\n"
            "    # Take every item off the the queue and\n"
            "    # return them in the order they were put in recieved.\n"
            "    recieved = None\n"
            "    return list(queue)\n")
    start = code.index("Take")
    end = code.index("recieved.") + len("recieved.")
    fill = paragraph_fill(embedded, code, start, end, "python")
    assert fill.texts == [code[start:end].replace("the the", "the")]
    assert [e["kind"] for e in fill.trace["proofread"]] == ["doubled"]
    # The same word is a typo where the document does not use it.
    elsewhere = code.replace("    recieved = None\n", "")
    assert paragraph_fill(embedded, elsewhere, start, end, "python").texts[0].endswith(" received.")
    # With an instruction the paragraph is rewritten by the decoder, not proofread.
    instructed = paragraph_fill(embedded, code, start, end, "python", instruction="make it shorter")
    assert "proofread" not in instructed.trace


def test_margin_tuning_judges_each_setting_on_the_same_scores():
    from benchmarks.proofread_tune import judge_margins

    original, bad = "It is equal to the value.", "It are eqal to the the value."
    edits = candidates(bad, LEXICON)
    scores = {"typo": 9.0, "agreement": 1.5, "doubled": 2.5}
    rows = [(original, bad, edits, [scores[e.kind] for e in edits])]
    assert {e.kind for e in edits} == set(scores)
    shipped = judge_margins(rows, Margins())
    assert (shipped["fixed"], shipped["broken"]) == (1.0, 0.0)
    assert judge_margins(rows, Margins(typo=10.0))["fixed"] == pytest.approx(2 / 3, abs=1e-3)
    assert judge_margins(rows, Margins(typo=10.0, agreement=2.0, doubled=3.0))["fixed"] == 0.0


def test_the_lexicon_counts_plain_words_as_proofreading_reads_them():
    from dg_engine.train.lexicon import count_words

    counts = count_words(["The value, the VALUE: see os.path and foo_bar; don't x2 `code` value."])
    assert counts["the"] == 2 and counts["value"] == 3
    assert not {"os", "path", "foo", "bar", "don", "t", "x"} & set(counts)
