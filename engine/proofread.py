"""Proofreading prose: the word edits a reader would make, kept only where the model agrees.

Rewriting a paragraph with the diffusion decoder (the canvas seeded with the paragraph, its
least confident tokens re-noised) fixed 8% of the injected errors of `benchmarks/prose.py` with
the embedded model: a small model asked to write prose writes worse prose than it reads. Reading
is what it can do, so proofreading asks it only to judge. Candidate edits come from rules:

* a typo: a word the lexicon (`lexicon.py`) lacks, replaced by a known word one edit away;
* an agreement error: `is`/`are`, `has`/`have`, `was`/`were`, `does`/`do` swapped;
* a doubled word: the second of two equal words in a row dropped;
* an article before the wrong sound: `a` for `an` and back.

The judge is the log-likelihood of the paragraph, after the text before it, under the model's
next-token head (the causal encoder that block-parallel training gives every token a loss): an
edit is kept when the paragraph with it is more likely by more than its kind's margin, in nats.
Candidates are scored in batches that share the encoded context.
The margins were chosen on documentation the model trains on, with the benchmark's kinds of errors
injected (`benchmarks/proofread_tune.py`): a typo's replacement must gain 8 nats (a misspelt word
splits into several unlikely tokens, so a real fix gains 10-30; a rare correct word's neighbour
gains less), a swapped verb 1, a dropped twin or a swapped article 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from .autoregressive import head_logits
from .kvcache import fork
from .lexicon import Lexicon

AGREEMENT = {"is": "are", "are": "is", "has": "have", "have": "has", "was": "were", "were": "was",
             "does": "do", "do": "does"}
ARTICLES = {"a": "an", "an": "a", "A": "An", "An": "A"}
# A plain word, not part of a name (`foo_bar`, `os.path`, `x2`), a path or an option.
WORD = re.compile(r"(?<![\w'./\\-])[A-Za-z]+(?![\w'/\\-]|\.\w)")
# What may separate a doubled word from its twin: spaces, or a line break and a comment's prefix.
BETWEEN_WORDS = re.compile(r" +|[ \t]*\n[ \t]*(?:#+|//+|\*|--|;+)?[ \t]*")
# Text no word edit may touch: inline code, links and addresses.
PROTECTED = re.compile(r"`[^`\n]*`|\[[^\]\n]*\]\([^)\n]*\)|<[^>\n]*>|\b\w+://\S+")
MIN_TYPO_LENGTH = 3
# Held-out documentation has about 2% of its words outside the lexicon.
MAX_UNKNOWN_SHARE = 0.25
MAX_CANDIDATES = 64
MAX_CONTEXT_TOKENS = 256


@dataclass(frozen=True)
class Margins:
    """Nats of log-likelihood an edit must gain to be kept, by kind (see the module docstring)."""

    typo: float = 8.0
    agreement: float = 1.0
    doubled: float = 2.0
    article: float = 2.0


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str
    kind: str
    gain: float = 0.0

    def apply(self, paragraph: str) -> str:
        return paragraph[: self.start] + self.text + paragraph[self.end :]


def _like(original: str, word: str) -> str:
    """`word` Capitalised when `original` is (other mixed case is a name, never a typo)."""
    return word[:1].upper() + word[1:] if original[:1].isupper() else word


def candidates(paragraph: str, lexicon: Lexicon, known: frozenset[str] = frozenset()) -> list[Edit]:
    """Every rule's edits of `paragraph`; `known` holds words to trust beyond the lexicon (the
    document's own words elsewhere)."""
    protected = [m.span() for m in PROTECTED.finditer(paragraph)]
    words = [m for m in WORD.finditer(paragraph) if not any(a <= m.start() < b for a, b in protected)]
    out: list[Edit] = []
    typos: list[Edit] = []
    long = [m.group() for m in words if len(m.group()) >= MIN_TYPO_LENGTH]
    unknown = {w for w in long if _unknown(w, lexicon, known)}
    # Prose the lexicon mostly does not know (another language, a list of names) has no typos it
    # could name: its words would be "corrected" into English ones.
    unknown_words = sum(w in unknown for w in long)
    spelling = bool(lexicon.counts) and unknown_words <= max(2, MAX_UNKNOWN_SHARE * len(long))
    for j, m in enumerate(words):
        word = m.group()
        lower = word.lower()
        if spelling and word in unknown:
            typos += [Edit(*m.span(), _like(word, n), "typo") for n in lexicon.neighbours(lower)[:8]]
        if word in AGREEMENT:
            out.append(Edit(*m.span(), AGREEMENT[word], "agreement"))
        if word in ARTICLES and j + 1 < len(words) and paragraph[m.end() : words[j + 1].start()] == " ":
            out.append(Edit(*m.span(), ARTICLES[word], "article"))
        if j and words[j - 1].group().lower() == lower and BETWEEN_WORDS.fullmatch(paragraph, words[j - 1].end(),
                                                                                   m.start()):
            # The second word goes with the space after it, so a wrapped line keeps its prefix.
            end = m.end() + 1 if paragraph[m.end() : m.end() + 1] == " " else m.end()
            start = m.start() if end > m.end() else words[j - 1].end()
            out.append(Edit(start, end, "", "doubled"))
    # A long paragraph with many unknown words is cut to MAX_CANDIDATES rows: typos go last, so
    # the few other candidates are never the ones cut.
    return (out + typos)[:MAX_CANDIDATES]


def _unknown(word: str, lexicon: Lexicon, known: frozenset[str]) -> bool:
    """A word that may be a typo: not in the lexicon or the document, not a plural of a known word,
    and not written as a name (`ABORT`, `camelCase`) or an acronym."""
    lower = word.lower()
    if word[1:] != word[1:].lower() or lower in known or lexicon.known(lower):
        return False
    return not (lower.endswith("s") and not lower.endswith("ss") and lexicon.known(lower[:-1]))


@torch.inference_mode()
def log_likelihoods(model, context: list[int], rows: list[list[int]], chunk: int = 8) -> list[float]:
    """Log-likelihood of each row's tokens after `context`, under the next-token head.

    The context is encoded once and its cache shared by every row; rows go `chunk` at a time
    (their logits are [chunk, T, V]), padded on the right, which a causal encoder's earlier
    positions never see. `context` holds at least one token (the first row token's condition).
    """
    if not context:
        raise ValueError("scoring needs at least one context token before the paragraph")
    encoder, device = model.model.encoder, model.device
    cache = DynamicCache(config=model.config.get_text_config())
    prompt = torch.tensor([context], dtype=torch.long, device=device)  # [1, Tc]
    last = encoder(input_ids=prompt, past_key_values=cache, use_cache=True).last_hidden_state[:, -1:]  # [1, 1, H]
    out: list[float] = []
    for i in range(0, len(rows), chunk):
        part = rows[i : i + chunk]
        width = max(1, max(map(len, part)))
        ids = torch.tensor([r + [0] * (width - len(r)) for r in part], dtype=torch.long, device=device)  # [n, T]
        positions = torch.arange(len(context), len(context) + width, device=device).expand(len(part), -1)
        hidden = encoder(input_ids=ids, past_key_values=fork(cache, len(part)), position_ids=positions,
                         use_cache=True).last_hidden_state  # [n, T, H]
        # Position t's hidden state predicts token t + 1: the context's last one predicts token 0.
        hidden = torch.cat([last.expand(len(part), -1, -1), hidden[:, :-1]], 1)  # [n, T, H]
        token_lp = _log_probs(model, hidden).gather(-1, ids[..., None])[..., 0]  # [n, T]
        out += [float(token_lp[j, : len(r)].sum()) for j, r in enumerate(part)]
    return out


def gains(model, context: list[int], original: list[int], variants: list[list[int]], chunk: int = 8) -> list[float]:
    """Each variant's log-likelihood after `context` minus the original's.

    Rows are scored whole. Scoring each variant only from its first changed token, after a cut
    view of the original's cache, was measured 9% slower on one CPU thread (100 held-out
    paragraphs: more and smaller forward passes over rows this short), so it was not kept.
    """
    scores = log_likelihoods(model, context, [original] + variants, chunk)
    return [s - scores[0] for s in scores[1:]]


def _log_probs(model, hidden: torch.Tensor) -> torch.Tensor:
    return head_logits(model, hidden).log_softmax(-1)  # [n, T, V]


def choose(edits: list[Edit], gains: list[float], margins: Margins) -> list[Edit]:
    """The best edit of each place that clears its margin, places not overlapping, best first."""
    kept: list[Edit] = []
    ranked = sorted(zip(gains, range(len(edits))), reverse=True)
    for gain, i in ranked:
        e = edits[i]
        if gain <= getattr(margins, e.kind) or any(e.start < k.end and k.start < e.end or e.start == k.start
                                                   for k in kept):
            continue
        kept.append(Edit(e.start, e.end, e.text, e.kind, round(gain, 3)))
    return kept


def proofread(model, encode, bos: list[int], paragraph: str, before: str, lexicon: Lexicon,
              margins: Margins = Margins(), known: frozenset[str] = frozenset()) -> tuple[str, list[Edit]]:
    """`paragraph` with the kept edits applied, and those edits (in the paragraph's offsets).

    `encode` turns text into token ids; `bos` starts every row; `before` is the document's text
    before the paragraph (its last `MAX_CONTEXT_TOKENS` tokens are the context).
    """
    edits = candidates(paragraph, lexicon, known)
    if not edits:
        return paragraph, []
    # The first token needs something before it to be scored: without a start token or text
    # before, a paragraph break stands in.
    context = (bos + encode(before)[-MAX_CONTEXT_TOKENS:]) or encode("\n\n")
    scored = gains(model, context, encode(paragraph), [encode(e.apply(paragraph)) for e in edits])
    kept = choose(edits, scored, margins)
    for e in sorted(kept, key=lambda e: -e.start):
        paragraph = e.apply(paragraph)
    return paragraph, sorted(kept, key=lambda e: e.start)
