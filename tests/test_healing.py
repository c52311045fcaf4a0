"""Token healing (`dg_engine.healing`): the head may finish the prefix's last token, on the tiny model."""

from __future__ import annotations

import pytest
import torch

from dg_engine import FillRequest
from dg_engine.autoregressive import ar_generate, next_token_logits
from dg_engine.healing import Healer, trim
from dg_engine.lead import Lead
from dg_engine.prompt import encode

PREFIX = "def area(width, height):\n    return "
SUFFIX = "\n\n\nprint(area(2, 3))\n"


def texts(engine, ids) -> list[str]:
    return [engine.tokenizer.decode([t]) for t in ids]


def test_the_prefixs_last_token_is_taken_back_unless_it_holds_a_line_break(engine):
    healer, fim_middle = engine.healer, engine.format.specials.fim_middle
    prompt = engine.format.infill_ids(PREFIX, SUFFIX)
    heal = healer.point(prompt, fim_middle)
    assert heal is not None and heal.text == engine.tokenizer.decode(prompt[-2:-1]) and heal.text.endswith(" ")
    allowed = heal.allowed.tolist()
    assert prompt[-2] in allowed and len(allowed) > 1
    assert all(t.startswith(heal.text) for t in texts(engine, allowed))
    assert not set(allowed) & (engine.format.stop_ids | set(engine.tokenizer.all_special_ids))
    # Every token whose text starts with the taken-back text is allowed.
    assert len(allowed) == sum(t.startswith(heal.text) for t in healer.texts) - sum(
        healer.texts[t].startswith(heal.text) for t in engine.tokenizer.all_special_ids)
    # After a line break (and its indentation) the next line starts as it is: nothing to heal.
    assert healer.point(engine.format.infill_ids("def f():\n    ", SUFFIX), fim_middle) is None
    # Nor is a prompt healed that does not end with <fim_middle> after the prefix.
    assert healer.point(prompt[:-1], fim_middle) is None
    assert healer.point(engine.format.infill_ids("", SUFFIX), fim_middle) is None


@torch.inference_mode()
def healed_head(engine, prefix: str, suffix: str, count: int) -> tuple[str, list[int]]:
    """What a healed head writes, the slow way: the prompt without the prefix's last token, its
    first token the most likely of those that continue the taken-back text, then greedy."""
    prompt = engine.format.infill_ids(prefix, suffix)
    heal = engine.healer.point(prompt, engine.format.specials.fim_middle)
    short = prompt[:-2] + prompt[-1:]
    hidden = engine.model.model.encoder(input_ids=torch.tensor([short])).last_hidden_state[:, -1:]
    logits = next_token_logits(engine.model, hidden)[0]  # [V]
    first = int(heal.allowed[logits[heal.allowed].argmax()])
    rest, _, _ = ar_generate(engine.model, short + [first], count - 1, set(engine.format.stop_ids))
    return heal.text, [first, *rest]


def test_a_healed_lead_continues_the_taken_back_text_and_the_fill_leaves_it_out(engine):
    taken, head = healed_head(engine, PREFIX, SUFFIX, 3)
    assert len(head) == 3, "the tiny model's head must not end this middle at once"
    first_rest = engine.tokenizer.decode(head[:1])[len(taken):]
    want = encode(engine.tokenizer, first_rest) + head[1:]
    result = engine.fill(FillRequest(PREFIX, SUFFIX, seed=5, lead_tokens=3))
    cand = result.candidates[0]
    assert cand.lead == len(want) and cand.token_ids[: cand.lead] == want
    assert cand.text.startswith(engine.tokenizer.decode(head)[len(taken):])
    assert len(cand.confidences) == len(cand.token_ids) == len(cand.token_offsets)
    assert cand.token_offsets[-1][1] == len(cand.text)
    # Unhealed, the head starts after the space instead.
    plain = engine.fill(FillRequest(PREFIX, SUFFIX, seed=5, lead_tokens=3, heal=False)).candidates[0]
    greedy, _, _ = ar_generate(engine.model, engine.format.infill_ids(PREFIX, SUFFIX), 3, set(engine.format.stop_ids))
    assert plain.token_ids[:3] == greedy


def test_a_hole_inside_a_line_gets_one_healed_token_or_none(engine):
    inside = " * height\n"  # the line goes on after the hole
    taken, head = healed_head(engine, PREFIX, inside, 1)
    want = encode(engine.tokenizer, engine.tokenizer.decode(head)[len(taken):])
    cand = engine.fill(FillRequest(PREFIX, inside, seed=3, lead_tokens=8)).candidates[0]
    assert cand.lead == len(want) and cand.token_ids[: cand.lead] == want
    # Without healing, or where the prefix cannot be healed, such a hole is not led at all.
    assert engine.fill(FillRequest(PREFIX, inside, seed=3, lead_tokens=8, heal=False)).candidates[0].lead == 0
    after_indent = "def area(width, height):\n    "
    assert engine.fill(FillRequest(after_indent, inside, seed=3, lead_tokens=8)).candidates[0].lead == 0


def test_a_healed_fill_leaves_the_prefix_cache_whole(engine):
    healed = engine.fill(FillRequest(PREFIX, SUFFIX, seed=1, lead_tokens=4, max_canvases=2))
    assert healed.candidates[0].lead > 0
    assert engine.prefix_cache.cache.get_seq_length() == healed.prompt_tokens == len(engine.prefix_cache.tokens)
    warm = engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=0))
    cold = engine.fill(FillRequest(PREFIX, SUFFIX, seed=2, lead_tokens=0, reuse_cache=False))
    assert warm.reused_tokens == warm.prompt_tokens
    assert [c.token_ids for c in warm.candidates] == [c.token_ids for c in cold.candidates]
    # And a second healed fill from the warm cache is the first one again.
    again = engine.fill(FillRequest(PREFIX, SUFFIX, seed=1, lead_tokens=4, max_canvases=2))
    assert again.reused_tokens == again.prompt_tokens
    assert [c.token_ids for c in again.candidates] == [c.token_ids for c in healed.candidates]


def test_the_autoregressive_baseline_takes_the_same_first_token_constraint(engine):
    prompt = engine.format.infill_ids(PREFIX, SUFFIX)
    stops = set(engine.format.stop_ids)
    free, _, _ = ar_generate(engine.model, prompt, 3, stops)
    forced = torch.tensor([t for t in range(8, 40) if t != free[0]])
    bound, _, _ = ar_generate(engine.model, prompt, 3, stops, forced)
    assert bound[0] in forced.tolist() and bound[0] != free[0]
    # The rest is greedy after it, as an unconstrained run from the same start would be.
    after, _, _ = ar_generate(engine.model, prompt + bound[:1], 2, stops)
    assert bound[1:] == after


@pytest.fixture(scope="module")
def pieces():
    """A vocabulary built the way SentencePiece builds Gemma's: spaces are `▁`, a piece starts at
    one, and a lone space is a piece of its own, so indentation is a run of space tokens."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token=None))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split("\u2581", "merged_with_next")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    text = ["def area(width, height):\n    result = width * height\n    return result\n"] * 50
    text += ["self.value = value\nreturn self.values\n"] * 30
    alphabet = list("\u2581abcdefghijklmnopqrstuvwxyz():=*.,\n")
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=120, special_tokens=["<pad>", "<fim_middle>"],
                                                      initial_alphabet=alphabet))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", additional_special_tokens=["<fim_middle>"])
    return fast, Healer(fast, frozenset(fast.all_special_ids)), fast.convert_tokens_to_ids("<fim_middle>")


def test_healing_on_a_sentencepiece_vocabulary(pieces):
    tokenizer, healer, fim_middle = pieces

    def prompt(prefix: str) -> list[int]:
        return tokenizer(prefix, add_special_tokens=False)["input_ids"] + [fim_middle]

    # The cursor after `return `: the lone space is taken back; ` result` may follow.
    heal = healer.point(prompt("def f():\n    return "), fim_middle)
    assert heal is not None and heal.text == " "
    allowed = {tokenizer.decode([t]) for t in heal.allowed.tolist()}
    assert " result" in allowed and "result" not in allowed and all(t.startswith(" ") for t in allowed)
    # Inside a word: the fragment is taken back and the fill is the rest of the word.
    heal = healer.point(prompt("self.val"), fim_middle)
    assert heal is not None and heal.text == "val"
    value = tokenizer.convert_tokens_to_ids("value")
    assert value in heal.allowed.tolist()
    trimmed = trim(tokenizer, Lead(ids=[value], confidences=[0.5]), heal)
    assert tokenizer.decode(trimmed.ids) == "ue"
    # Indentation written as several space tokens after the line break is left alone, as a break
    # with its indentation in one token is.
    indented = prompt("def f():\n    ")
    assert [tokenizer.decode([t]) for t in indented[-3:-1]] == [" ", " "]
    assert healer.point(indented, fim_middle) is None
