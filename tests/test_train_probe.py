"""The first-token probe: it reads each prompt's own last position and counts what it claims."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from dg_engine.train.model import build_model
from dg_engine.train.objective import softcapped_logits
from dg_engine.train.probe import first_token_guesses, first_token_probe


@pytest.fixture(scope="module")
def setup(fim_source):
    src, fmt = fim_source
    model = build_model("tiny", len(fmt.tokenizer), seed=0).eval()
    return src.batch_examples(seed=0, step=0, batch_size=6), fmt.specials.pad, model


def test_the_head_guess_is_read_at_each_prompts_own_end(setup):
    examples, pad, model = setup
    assert len({len(e.prompt_ids) for e in examples}) > 1  # right padding is exercised
    with torch.no_grad():
        _, head = first_token_guesses(model, examples, pad, torch.Generator().manual_seed(0))
        for i, e in enumerate(examples):
            ids = torch.tensor([e.prompt_ids])
            hidden = model.model.encoder(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
            alone = softcapped_logits(model, hidden[:, -1:])[0, 0].argmax()
            assert int(head[i]) == int(alone)


def test_the_shares_count_the_rigged_hits(setup):
    examples, pad, model = setup
    with torch.no_grad():
        decoder, head = first_token_guesses(model, examples, pad, torch.Generator().manual_seed(0))
    vocab = model.config.text_config.vocab_size
    # Even examples start with the decoder's guess, odd ones with a token neither guess names.
    rigged = []
    for i, e in enumerate(examples):
        miss = next(t for t in range(vocab) if t not in (int(decoder[i]), int(head[i])))
        first = int(decoder[i]) if i % 2 == 0 else miss
        rigged.append(replace(e, canvas_ids=[first] + e.canvas_ids[1:]))
    result = first_token_probe(model, rigged, pad, batch_size=len(rigged), seed=0)
    assert result["first_token_decoder"] == 0.5
    expected_head = sum(int(head[i]) == int(decoder[i]) for i in range(0, len(examples), 2)) / len(examples)
    assert result["first_token_next_token_head"] == round(expected_head, 4)
