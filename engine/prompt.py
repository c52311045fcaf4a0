"""Prompt formats: how a hole (prefix, suffix, optional context) becomes encoder tokens.

Two formats, chosen from the tokenizer:

* `FimFormat`, for tokenizers with FIM sentinels, in suffix-first order::

      [<bos>] (<file_sep> chunk)* <fim_suffix> suffix <fim_prefix> prefix <fim_middle> [middle so far]

  and the canvas holds ``middle <fim_end> <pad> ...``. Suffix first keeps the encoder's KV cache
  valid while the user types at the end of the prefix: only the tokens after the edit change.
* `ChatFormat`, for instruction-tuned checkpoints without sentinels (the released 26B-it): the
  chat template with an instruction that shows the code around a hole marker and asks for the
  missing code only; the canvas holds the answer and an end-of-turn token.

Text is tokenized piece by piece (never the joined string) so that the tokens of an unchanged
suffix are the same from one keystroke to the next, which is what makes prefix reuse work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from .tokens import SpecialTokens, special_tokens

HOLE_MARKER = "<|HOLE|>"

_INFILL_INSTRUCTION = (
    "Fill in the code at {marker}. Reply with only the code that replaces {marker}, "
    "without explanations and without code fences.\n\n{code}"
)
_REWRITE_INSTRUCTION = (
    "Rewrite the text between <REWRITE> and </REWRITE>{how}. Reply with only the rewritten text, "
    "without explanations and without code fences.\n\n{code}"
)


class PromptFormat(Protocol):
    """What the engine needs from a prompt format."""

    name: str
    specials: SpecialTokens
    stop_ids: frozenset[int]

    def infill_ids(
        self, prefix: str, suffix: str, chunks: Sequence[str] = (), middle_so_far: str = ""
    ) -> list[int]: ...

    def rewrite_ids(self, prefix: str, text: str, suffix: str, instruction: str | None) -> list[int]: ...


def encode(tokenizer, text: str) -> list[int]:
    """Tokens of plain text, without any special tokens added by the tokenizer."""
    if not text:
        return []
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class FimFormat:
    """Suffix-first fill-in-the-middle with the tokenizer's own sentinels."""

    tokenizer: object
    specials: SpecialTokens
    name: str = "fim"

    @property
    def stop_ids(self) -> frozenset[int]:
        return self.specials.stop_ids

    def infill_ids(
        self, prefix: str, suffix: str, chunks: Sequence[str] = (), middle_so_far: str = ""
    ) -> list[int]:
        s = self.specials
        ids: list[int] = [] if s.bos is None else [s.bos]
        if s.file_separator is not None:
            for chunk in chunks:
                ids += [s.file_separator, *encode(self.tokenizer, chunk)]
        ids += [s.fim_suffix, *encode(self.tokenizer, suffix)]
        ids += [s.fim_prefix, *encode(self.tokenizer, prefix)]
        ids += [s.fim_middle, *encode(self.tokenizer, middle_so_far)]
        return ids

    def rewrite_ids(self, prefix: str, text: str, suffix: str, instruction: str | None) -> list[int]:
        # A FIM model rewrites by re-filling the hole that the text occupies; the text itself
        # goes on the canvas as the seed, so the prompt is the plain infill prompt.
        return self.infill_ids(prefix, suffix)

    def canvas_ids(self, middle: str, canvas_length: int) -> list[int]:
        """The clean canvas for a middle: its tokens, end of middle, then padding (training)."""
        ids = encode(self.tokenizer, middle)[:canvas_length]
        if len(ids) < canvas_length:
            ids.append(self.specials.end_of_middle)
        return ids + [self.specials.pad] * (canvas_length - len(ids))


@dataclass
class ChatFormat:
    """An instruction in the chat template, for instruction-tuned models without FIM tokens."""

    tokenizer: object
    specials: SpecialTokens
    extra_stop_ids: frozenset[int] = frozenset()
    name: str = "chat"

    @property
    def stop_ids(self) -> frozenset[int]:
        return self.specials.stop_ids | self.extra_stop_ids

    def _chat(self, content: str) -> list[int]:
        messages = [{"role": "user", "content": content}]
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)

    def infill_ids(
        self, prefix: str, suffix: str, chunks: Sequence[str] = (), middle_so_far: str = ""
    ) -> list[int]:
        ids = self._chat(infill_instruction(prefix + middle_so_far, suffix, chunks))
        return ids + encode(self.tokenizer, middle_so_far)

    def rewrite_ids(self, prefix: str, text: str, suffix: str, instruction: str | None) -> list[int]:
        return self._chat(rewrite_instruction(prefix, text, suffix, instruction))


def infill_instruction(prefix: str, suffix: str, chunks: Sequence[str] = ()) -> str:
    """The user message that asks an instruction-tuned model for the code at a hole."""
    context = "".join(f"Other file excerpt:\n{c}\n\n" for c in chunks)
    return _INFILL_INSTRUCTION.format(marker=HOLE_MARKER, code=context + prefix + HOLE_MARKER + suffix)


def rewrite_instruction(prefix: str, text: str, suffix: str, instruction: str | None) -> str:
    """The user message that asks an instruction-tuned model to rewrite a marked span."""
    how = f" as follows: {instruction}" if instruction else " so that it reads better"
    return _REWRITE_INSTRUCTION.format(how=how, code=f"{prefix}<REWRITE>{text}</REWRITE>{suffix}")


@dataclass(frozen=True)
class FimText:
    """The suffix-first FIM prompt as text, for a server that tokenizes it (the remote backend).

    The sentinels are the served tokenizer's own spellings, found by asking the server how it
    tokenizes each known spelling; the layout is `FimFormat`'s.
    """

    fim_prefix: str
    fim_suffix: str
    fim_middle: str
    bos: str = ""
    file_separator: str = ""
    name: str = "fim"

    def infill(self, prefix: str, suffix: str, chunks: Sequence[str] = ()) -> str:
        parts = [self.bos]
        if self.file_separator:
            parts += [self.file_separator + chunk for chunk in chunks]
        parts += [self.fim_suffix, suffix, self.fim_prefix, prefix, self.fim_middle]
        return "".join(parts)


def choose_format(tokenizer, extra_stop_ids: Sequence[int] = ()) -> FimFormat | ChatFormat:
    """FIM sentinels when the tokenizer has them, else the chat template, else an error."""
    specials = special_tokens(tokenizer)
    if specials.has_fim:
        return FimFormat(tokenizer, specials)
    if getattr(tokenizer, "chat_template", None):
        return ChatFormat(tokenizer, specials, frozenset(extra_stop_ids))
    raise ValueError("the tokenizer has neither FIM sentinel tokens nor a chat template")
