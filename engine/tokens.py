"""Special tokens looked up by name from the tokenizer, never by number.

Every prompt format and the denoising loop need a handful of special token ids (padding, end of
text, the FIM sentinels, end of middle). Models differ in which ones they have and what ids they
got, so this module is the one place that resolves them from the tokenizer's own vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

# The names the embedded model's tokenizer uses. Other FIM-trained tokenizers spell them
# differently, so each role lists the spellings we recognise, most specific first.
FIM_PREFIX_NAMES = ("<fim_prefix>", "<|fim_prefix|>", "<PRE>")
FIM_SUFFIX_NAMES = ("<fim_suffix>", "<|fim_suffix|>", "<SUF>")
FIM_MIDDLE_NAMES = ("<fim_middle>", "<|fim_middle|>", "<MID>")
END_OF_MIDDLE_NAMES = ("<fim_end>", "<|fim_end|>", "<EOT>")
FILE_SEPARATOR_NAMES = ("<file_sep>", "<|file_sep|>")

# The special tokens the embedded tokenizer is trained with, in id order.
EMBEDDED_SPECIAL_TOKENS = (
    "<pad>",
    "<eos>",
    "<bos>",
    "<fim_prefix>",
    "<fim_suffix>",
    "<fim_middle>",
    "<fim_end>",
    "<file_sep>",
)


@dataclass(frozen=True)
class SpecialTokens:
    """Ids of the special tokens a model has; `None` where the tokenizer lacks one."""

    pad: int
    eos: int
    bos: int | None
    fim_prefix: int | None
    fim_suffix: int | None
    fim_middle: int | None
    end_of_middle: int | None
    file_separator: int | None

    @property
    def has_fim(self) -> bool:
        return None not in (self.fim_prefix, self.fim_suffix, self.fim_middle, self.end_of_middle)

    @property
    def stop_ids(self) -> frozenset[int]:
        """Tokens that end a middle: the end-of-middle sentinel, end of text and padding."""
        ids = {self.eos, self.pad}
        if self.end_of_middle is not None:
            ids.add(self.end_of_middle)
        return frozenset(ids)


def _lookup(vocab: dict[str, int], names: tuple[str, ...]) -> int | None:
    for name in names:
        if name in vocab:
            return vocab[name]
    return None


def special_tokens(tokenizer) -> SpecialTokens:
    """Resolve the special tokens of a Hugging Face tokenizer by their names."""
    vocab = tokenizer.get_vocab()
    eos = tokenizer.eos_token_id
    if eos is None:
        eos = _lookup(vocab, ("<eos>", "</s>", "<|endoftext|>"))
    if eos is None:
        raise ValueError("the tokenizer has no end-of-text token")
    pad = tokenizer.pad_token_id
    if pad is None:
        pad = _lookup(vocab, ("<pad>",))
    return SpecialTokens(
        pad=eos if pad is None else pad,
        eos=eos,
        bos=tokenizer.bos_token_id,
        fim_prefix=_lookup(vocab, FIM_PREFIX_NAMES),
        fim_suffix=_lookup(vocab, FIM_SUFFIX_NAMES),
        fim_middle=_lookup(vocab, FIM_MIDDLE_NAMES),
        end_of_middle=_lookup(vocab, END_OF_MIDDLE_NAMES),
        file_separator=_lookup(vocab, FILE_SEPARATOR_NAMES),
    )
