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
