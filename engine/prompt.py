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

import re
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

    def rewrite_ids(
        self, prefix: str, text: str, suffix: str, instruction: str | None, chunks: Sequence[str] = ()
    ) -> list[int]: ...


def encode(tokenizer, text: str) -> list[int]:
    """Tokens of plain text, without any special tokens added by the tokenizer."""
    if not text:
        return []
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def decode_with_offsets(tokenizer, ids: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """The text of `ids` and each token's character span in it."""
    text = tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    offsets, previous = [], 0
    for i in range(1, len(ids) + 1):
        # Byte-level tokens can split a character; a partial decode ends in U+FFFD there.
        part = tokenizer.decode(ids[:i], skip_special_tokens=True, clean_up_tokenization_spaces=False)
        length = len(part.rstrip("\ufffd")) if i < len(ids) else len(text)
        length = max(previous, min(length, len(text)))
        offsets.append((previous, length))
        previous = length
    return text, offsets


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

    def rewrite_ids(
        self, prefix: str, text: str, suffix: str, instruction: str | None, chunks: Sequence[str] = ()
    ) -> list[int]:
        # A FIM model rewrites by re-filling the hole that the text occupies; the text itself
        # goes on the canvas as the seed, so the prompt is the plain infill prompt, with the
        # chunks (a next edit's recent edits) where the training examples had them.
        return self.infill_ids(prefix, suffix, chunks)

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

    def rewrite_ids(
        self, prefix: str, text: str, suffix: str, instruction: str | None, chunks: Sequence[str] = ()
    ) -> list[int]:
        return self._chat(rewrite_instruction(prefix, text, suffix, instruction, chunks))


def infill_instruction(prefix: str, suffix: str, chunks: Sequence[str] = ()) -> str:
    """The user message that asks an instruction-tuned model for the code at a hole."""
    context = "".join(f"Other file excerpt:\n{c}\n\n" for c in chunks)
    return _INFILL_INSTRUCTION.format(marker=HOLE_MARKER, code=context + prefix + HOLE_MARKER + suffix)


def rewrite_instruction(
    prefix: str, text: str, suffix: str, instruction: str | None, chunks: Sequence[str] = ()
) -> str:
    """The user message that asks an instruction-tuned model to rewrite a marked span."""
    how = f" as follows: {instruction}" if instruction else " so that it reads better"
    context = "".join(f"Other file excerpt:\n{c}\n\n" for c in chunks)
    return _REWRITE_INSTRUCTION.format(how=how, code=f"{context}{prefix}<REWRITE>{text}</REWRITE>{suffix}")


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


@dataclass
class PinnedFormat:
    """The suffix pinned in the canvas: a diffusion-native infill for models without FIM sentinels.

    The prompt holds only what comes before the hole (plain text, or the chat instruction to
    continue it); the canvas holds free positions and then the first `PINNED_TOKENS` tokens of the
    suffix, clamped. The model reads those the way it reads everything in a canvas, in both
    directions, so the code after the hole shapes the fill without any sentinel having been
    trained. Rewrites keep the base format's layout."""

    base: FimFormat | ChatFormat
    name: str = "pinned"

    @property
    def tokenizer(self):
        return self.base.tokenizer

    @property
    def specials(self) -> SpecialTokens:
        return self.base.specials

    @property
    def stop_ids(self) -> frozenset[int]:
        return self.base.stop_ids

    def infill_ids(
        self, prefix: str, suffix: str, chunks: Sequence[str] = (), middle_so_far: str = ""
    ) -> list[int]:
        if isinstance(self.base, ChatFormat):
            ids = self.base._chat(_CONTINUE_INSTRUCTION.format(code="".join(f"{c}\n\n" for c in chunks) + prefix))
            return ids + encode(self.tokenizer, middle_so_far)
        s = self.specials
        ids: list[int] = [] if s.bos is None else [s.bos]
        if s.file_separator is not None:
            for chunk in chunks:
                ids += [s.file_separator, *encode(self.tokenizer, chunk)]
        return ids + encode(self.tokenizer, prefix + middle_so_far)

    def rewrite_ids(
        self, prefix: str, text: str, suffix: str, instruction: str | None, chunks: Sequence[str] = ()
    ) -> list[int]:
        if isinstance(self.base, ChatFormat) or self.specials.has_fim:
            return self.base.rewrite_ids(prefix, text, suffix, instruction, chunks)
        return self.infill_ids(prefix, suffix, chunks)  # no sentinels, no template: the text re-fills its place

    def suffix_head(self, suffix: str) -> list[int]:
        """The suffix tokens pinned after the free positions."""
        return encode(self.tokenizer, suffix)[:PINNED_TOKENS]


# An answer in a code fence (```python ... ```), as instruction-tuned models like to write them.
_FENCE = re.compile(r"^\s*```[\w+#.-]*[ \t]*\n(.*?)(?:\n?```[ \t]*)?\s*$", re.S)
MIN_REPEAT = 4


def clean_chat_answer(answer: str, prefix: str) -> str:
    """A chat model's answer as a middle: out of its code fence, without the code before the hole
    that it repeated (the hole's line, or more). Overlap with the suffix is post-processing's."""
    fenced = _FENCE.match(answer)
    if fenced:
        answer = fenced.group(1)
    # The longest end of the prefix that the answer starts with, if it is not trivially short.
    line_start = prefix.rfind("\n", 0, max(0, len(prefix) - 1)) + 1
    for start in range(max(0, len(prefix) - 2000), len(prefix) - MIN_REPEAT + 1):
        if 0 < start < line_start and prefix[start - 1] != "\n":
            continue  # earlier lines are repeated whole; the hole's own line from anywhere
        repeated = prefix[start:]
        if answer.startswith(repeated):
            return answer[len(repeated):]
    return answer


PINNED_TOKENS = 16
_CONTINUE_INSTRUCTION = "Continue this code. Reply with only the code that comes next.\n\n{code}"
PROMPT_LAYOUTS = ("auto", "fim", "pinned", "chat")


def choose_format(tokenizer, extra_stop_ids: Sequence[int] = (), requested: str = "auto"):
    """The prompt layout: `auto` takes FIM sentinels when the tokenizer has them, else the chat
    template; `fim`, `chat` and `pinned` (the suffix pinned in the canvas, under the chat turns
    when there is a template, else after plain text) are taken as asked, or refused with the reason."""
    specials = special_tokens(tokenizer)
    chat = ChatFormat(tokenizer, specials, frozenset(extra_stop_ids)) if getattr(tokenizer, "chat_template", None) else None
    fim = FimFormat(tokenizer, specials) if specials.has_fim else None
    if requested == "fim" and fim is None:
        raise ValueError("prompt format 'fim' needs a tokenizer with FIM sentinel tokens; this one has none")
    if requested == "chat" and chat is None:
        raise ValueError("prompt format 'chat' needs a tokenizer with a chat template; this one has none")
    if requested == "chat":
        return chat
    if requested == "pinned":
        # A tokenizer with a chat template belongs to an instruction-tuned model: pin under its turns.
        return PinnedFormat(chat or fim or FimFormat(tokenizer, specials))
    if fim is not None:
        return fim
    if chat is not None:
        return chat
    raise ValueError("the tokenizer has neither FIM sentinel tokens nor a chat template; try prompt format 'pinned'")
