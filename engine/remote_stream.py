"""Reading a completions server's answers: what it serves, and its streamed choices as candidates.

Split from `remote.py` so that the request logic there stays readable: this module holds the
plain data the remote backend learns from the server (`Served`, and the sentinel spellings its
tokenizer has), the accumulation of streamed events (text, token ids, logprobs, finish reason)
into one row per choice, and the turning of a row into the engine's `Candidate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from .engine import Candidate
from .prompt import FimText
from .remote_http import RemoteResponseError
from .tokens import END_OF_MIDDLE_NAMES, FILE_SEPARATOR_NAMES, FIM_MIDDLE_NAMES, FIM_PREFIX_NAMES, FIM_SUFFIX_NAMES

BOS_NAMES = ("<bos>", "<s>")
PAD_NAMES = ("<pad>",)
EOS_NAMES = ("<eos>", "</s>", "<|endoftext|>")


@dataclass
class Served:
    """What the client learned about the server when it connected."""

    model: str
    max_model_len: int = 0
    version: str = ""
    fim: FimText | None = None
    ids: dict[str, int] = field(default_factory=dict)  # role -> token id (end, pad, eos)
    vocab_size: int = 0  # learned on the first seeded request

    @property
    def stop_ids(self) -> list[int]:
        return sorted({self.ids[k] for k in ("end", "eos", "pad") if k in self.ids})


@dataclass
class Row:
    """One streamed choice, accumulated across the events of a request."""

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    finish: str | None = None


class TextRows:
    """A draft for the step callback: `rows[0].tolist()` gives the draft, as a local canvas would."""

    def __init__(self, text: str):
        self._text = text

    def __getitem__(self, index: int) -> "TextRows":
        return self

    def tolist(self) -> str:
        return self._text


def absorb(row: Row, choice: dict) -> None:
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    if text is not None and not isinstance(text, str):
        raise RemoteResponseError(f"a choice's text is not a string: {str(text)[:100]}")
    row.text += text or ""
    row.token_ids += [int(t) for t in choice.get("token_ids") or []]
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        row.logprobs += [float(p) if p is not None else 0.0 for p in logprobs.get("token_logprobs") or []]
        row.tokens += [str(t) for t in logprobs.get("tokens") or []]
    if choice.get("finish_reason"):
        row.finish = choice["finish_reason"]


def offsets(text: str, tokens: list[str]) -> list[tuple[int, int]]:
    """Character spans of tokens in `text`; a token that is not in the text (a special token)
    gets an empty span where it stands."""
    spans, at = [], 0
    for token in tokens:
        if token and text.startswith(token, at):
            spans.append((at, at + len(token)))
            at += len(token)
        else:
            spans.append((at, at))
    return spans


def learn_format(served: Served, tokenize: Callable[[str], list[int]], prompt_format: str) -> None:
    """Find which sentinel spellings are single tokens of the served tokenizer; with FIM's three,
    `served.fim` lays prompts out with them. Raises `RemoteResponseError` unless the server
    simply has no `/tokenize`."""
    if prompt_format == "chat":
        return
    found: dict[str, str] = {}
    try:
        for role, names in (("prefix", FIM_PREFIX_NAMES), ("suffix", FIM_SUFFIX_NAMES), ("middle", FIM_MIDDLE_NAMES),
                            ("end", END_OF_MIDDLE_NAMES), ("file", FILE_SEPARATOR_NAMES), ("bos", BOS_NAMES),
                            ("pad", PAD_NAMES), ("eos", EOS_NAMES)):
            for name in names:
                ids = tokenize(name)
                if len(ids) == 1:
                    found[role] = name
                    served.ids[role] = ids[0]
                    break
    except RemoteResponseError as exc:
        if exc.status not in (404, 405):
            raise
        # No /tokenize: only an explicit "fim" setting gets FIM, with the common spellings.
        if prompt_format == "fim":
            found = {"prefix": "<fim_prefix>", "suffix": "<fim_suffix>", "middle": "<fim_middle>"}
    if {"prefix", "suffix", "middle"} <= found.keys():
        served.fim = FimText(found["prefix"], found["suffix"], found["middle"],
                             bos=found.get("bos", ""), file_separator=found.get("file", ""))


def to_candidate(served: Served, row: Row, width: int) -> Candidate:
    """A streamed row as the engine's candidate: stop tokens dropped from its ids, its canvas kept
    (for a syntax repair) when the answer fits in one."""
    stops = set(served.stop_ids)
    kept = [i for i, t in enumerate(row.token_ids) if t not in stops]
    end = next((i for i, t in enumerate(row.token_ids) if t in stops), len(row.token_ids))
    spans = offsets(row.text, row.tokens) if len(row.tokens) == len(row.token_ids) else []
    pad = served.ids.get("pad", served.ids.get("eos", 0))
    canvas = row.token_ids + [pad] * (width - len(row.token_ids)) if len(row.token_ids) <= width else []
    return Candidate(
        text=row.text,
        token_ids=[row.token_ids[i] for i in kept],
        token_offsets=[spans[i] for i in kept] if spans else [],
        confidences=[math.exp(row.logprobs[i]) for i in kept] if len(row.logprobs) == len(row.token_ids) else [],
        steps=0,
        tokens_per_forward=0.0,
        finished=row.finish == "stop" or end < len(row.token_ids),
        canvas=canvas,
        length=width,
    )
