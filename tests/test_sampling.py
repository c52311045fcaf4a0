"""The denoising loop's token sampler draws from the model's distribution, nothing else."""

import torch

from dg_engine.denoise import sample_tokens


def test_sample_frequencies_match_probabilities():
    torch.manual_seed(0)
    probs = torch.tensor([0.1, 0.2, 0.0, 0.7])
    draws = sample_tokens(probs.expand(4, 50_000, 4).contiguous())  # [4, 50000]
    assert draws.shape == (4, 50_000)
    freq = torch.bincount(draws.flatten(), minlength=4).float() / draws.numel()
    # 200,000 draws: the standard error of each frequency is about 0.001.
    assert torch.allclose(freq, probs, atol=0.005), freq
    assert int((draws == 2).sum()) == 0


def test_certain_positions_always_return_their_token():
    torch.manual_seed(1)
    probs = torch.zeros(3, 8, 100)
    want = torch.randint(0, 100, (3, 8))
    probs.scatter_(-1, want[..., None], 1.0)
    for _ in range(20):
        assert torch.equal(sample_tokens(probs), want)


def test_rounding_never_yields_an_index_past_the_vocabulary():
    torch.manual_seed(2)
    logits = torch.randn(2, 16, 4096) * 8
    probs = torch.softmax(logits, dim=-1)
    draws = sample_tokens(probs)
    assert int(draws.max()) < 4096 and int(draws.min()) >= 0
    # A sharp distribution is sampled almost always at its mode.
    sharp = torch.softmax(logits * 50, dim=-1)
    agree = (sample_tokens(sharp) == sharp.argmax(-1)).float().mean()
    assert agree > 0.95


def test_floored_logits_keep_probabilities_entropy_and_argmax():
    from dg_engine.denoise import LOGIT_FLOOR, floor_logits

    torch.manual_seed(3)
    # A temperature of 0.05 turns ordinary logits into values thousands of nats apart.
    logits = torch.randn(2, 16, 4096) * 4 / 0.05
    floored = floor_logits(logits)
    assert float((floored.amax(-1) - floored.amin(-1)).max()) <= LOGIT_FLOOR + 1e-3
    assert torch.equal(floored.argmax(-1), logits.argmax(-1))
    assert torch.allclose(torch.softmax(floored, -1), torch.softmax(logits, -1), atol=1e-30)
    before = torch.distributions.Categorical(logits=logits).entropy()
    after = torch.distributions.Categorical(logits=floored).entropy()
    assert torch.allclose(before, after, atol=1e-6)
    # Logits within the floor of the best token are left exactly as they were.
    near = logits >= logits.amax(-1, keepdim=True) - LOGIT_FLOOR
    assert torch.equal(floored[near], logits[near])
