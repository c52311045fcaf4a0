"""Token healing: the head may finish the prefix's last token instead of starting after it.

An editor's cursor sits wherever typing stopped: after a space (`return |`), inside a word
(`self.val|`). The tokenizer then ends the prefix with a token that text seldom has there: a lone
space, where whole-file tokenization would have joined it to the next word (` result`), or a
fragment of one. The head learned from files tokenized whole, so such a prefix reads as unusual
and its first tokens suffer: the embedded model writes `return (n)` where `return result` belongs
(`benchmarks/obvious.py`), its top token being `(` at 10% against ` result` at 16% once the space
is taken back.

Healing takes the prefix's last token out of the prompt and lets the head's first token be any
token whose text starts with it; the fill is what follows the taken-back text. A line break and the
indentation after one are left alone: they are what the next line must start with, and a deeper
indentation token would also "start with" them: healing those too took 66 held-out whole lines
(seed 1) from 0.262 to 0.177 edit similarity, and healing only a bare line break left them at
0.259. On the 400 held-out holes healing took the fills from 0.222 to 0.263 edit similarity
(`benchmarks/healing.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .lead import Lead, extend


@dataclass(frozen=True)
class Heal:
    text: str  # the prefix's last token's text, taken back out of the prompt
    allowed: torch.Tensor  # [K] the tokens the head's first one may be: their text starts with `text`


class Healer:
    """Finds where a FIM prompt can be healed; keeps the vocabulary's texts and each allowed set."""

    def __init__(self, tokenizer, specials: frozenset[int]):
        self.tokenizer = tokenizer
        self.specials = specials
        self._texts: list[str] | None = None
        self._allowed: dict[str, torch.Tensor] = {}

    def point(self, prompt: list[int], fim_middle: int) -> Heal | None:
        """The healing of a prompt that ends `prefix <fim_middle>`, or None where there is none."""
        if len(prompt) < 3 or prompt[-1] != fim_middle or prompt[-2] in self.specials:
            return None
        text = self.tokenizer.decode([prompt[-2]])
        # A byte-level token that splits a character decodes to U+FFFD: no text to start with.
        if not text or "\n" in text or "\ufffd" in text:
            return None
        if not text.strip() and self._indents(prompt[:-2]):
            return None  # indentation on a token of its own, after the line break's

        allowed = self._allowed.get(text)
        if allowed is None:
            allowed = torch.tensor([t for t, s in enumerate(self.texts) if s.startswith(text) and t not in self.specials])
            self._allowed[text] = allowed
        return Heal(text, allowed)

    def _indents(self, before: list[int], longest: int = 32) -> bool:
        """Whether `before` ends with a line break and nothing but whitespace after it. A vocabulary
        of SentencePiece pieces writes indentation as several space tokens, not one with the break."""
        for token in reversed(before[-longest:]):
            text = self.texts[token]
            if text.strip():
                return False
            if "\n" in text:
                return True
        return False

    def warm(self) -> None:
        """Decode the vocabulary now, while the model loads, not on the first healed fill: a
        released checkpoint's 262k tokens take about 1.6 s on one core."""
        _ = self.texts

    @property
    def texts(self) -> list[str]:
        if self._texts is None:  # 4k tokens for the embedded model, 262k for a released one: once
            self._texts = [self.tokenizer.decode([t]) for t in range(len(self.tokenizer))]
        return self._texts


def rewind(model, cache, prompt: list[int], start: int) -> tuple[torch.Tensor, int]:
    """Take the prefix's last token out of a one-row `cache` of `prompt` (`start` tokens) and encode
    `<fim_middle>` after what is left; returns its hidden state [1, 1, H] and the new length."""
    cache.crop(-2)  # the last prefix token and <fim_middle>
    return extend(model, cache, prompt[-1:], start - 2), start - 1


def trim(tokenizer, led: Lead, heal: Heal) -> Lead:
    """The head's tokens without the taken-back text: the first one's rest, tokenized on its own."""
    if not led.ids:
        return led
    rest = tokenizer.decode(led.ids[:1])[len(heal.text):]
    head = list(tokenizer(rest, add_special_tokens=False)["input_ids"]) if rest else []
    return Lead(ids=head + led.ids[1:], confidences=led.confidences[:1] * len(head) + led.confidences[1:],
                stopped=led.stopped, passes=led.passes + 1,  # + the pass that encoded <fim_middle> again
                alternatives=[trim(tokenizer, a, heal) for a in led.alternatives])
