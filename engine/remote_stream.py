"""Reading a completions server's answers: what it serves, and its streamed choices as candidates.

Split from `remote.py` so that the request logic there stays readable: this module holds the
plain data the remote backend learns from the server (`Served`) and the accumulation of streamed
events (text, token ids, logprobs, finish reason) into one row per choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .prompt import FimText
from .remote_http import RemoteResponseError


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
