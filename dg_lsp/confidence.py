"""Confidence in the editor: where the model was unsure, once its text is in the document.

A fill or rewrite is offered first (ghost text, a code action, an applied edit) and lands in the
document later, through the editor. The tracker keeps each offered text with its low-confidence
spans as *pending*; when a later version of the document contains that text near where it was
offered, the spans become *active*, in document offsets. Every edit shifts the active spans, and an
edit that touches a span removes it: the user has looked at it. The server publishes active spans
as diagnostics (severity Hint, code `dg.low-confidence`) and/or inlay hints, as configured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

PENDING_SECONDS = 120.0
SEARCH_SLACK = 400


@dataclass
class Span:
    start: int
    end: int
    confidence: float


@dataclass
class Pending:
    offset: int
    text: str
    spans: list[tuple[int, int, float]]  # relative to `text`
    created: float = field(default_factory=time.monotonic)


class ConfidenceTracker:
    def __init__(self) -> None:
        self.pending: dict[str, list[Pending]] = {}
        self.active: dict[str, list[Span]] = {}

    def offer(self, uri: str, offset: int, text: str, spans: list[tuple[int, int, float]]) -> None:
        """Remember an offered text; only texts with low-confidence spans are worth tracking."""
        if not spans or not text.strip():
            return
        items = [p for p in self.pending.get(uri, []) if time.monotonic() - p.created < PENDING_SECONDS]
        self.pending[uri] = (items + [Pending(offset, text, spans)])[-8:]

    def edited(self, uri: str, edits: list[tuple[int, int, int]], text: str) -> bool:
        """Shift or drop active spans for edits (start, old_end, new_length), then match pending
        offers against the new text. Returns True when the active spans changed."""
        changed = False
        spans = self.active.get(uri, [])
        for start, old_end, new_length in edits:
            delta = new_length - (old_end - start)
            kept = []
            for span in spans:
                if span.end <= start:
                    kept.append(span)
                elif span.start >= old_end:
                    kept.append(Span(span.start + delta, span.end + delta, span.confidence))
                else:
                    changed = True  # The user edited inside the span: it has been looked at.
            spans = kept
        landed = self._match_pending(uri, text)
        if landed:
            spans = sorted(spans + landed, key=lambda s: s.start)
            changed = True
        if spans or uri in self.active:
            self.active[uri] = spans
        return changed or bool(edits and spans)

    def _match_pending(self, uri: str, text: str) -> list[Span]:
        found: list[Span] = []
        remaining = []
        for offer in self.pending.get(uri, []):
            low = max(0, offer.offset - SEARCH_SLACK)
            at = text.find(offer.text, low, offer.offset + len(offer.text) + SEARCH_SLACK)
            if at < 0:
                remaining.append(offer)
                continue
            found += [Span(at + a, at + b, p) for a, b, p in offer.spans]
        self.pending[uri] = remaining
        return found

    def spans(self, uri: str) -> list[Span]:
        return list(self.active.get(uri, []))

    def clear(self, uri: str) -> None:
        self.pending.pop(uri, None)
        self.active.pop(uri, None)
