"""A line lead by beam search: the head's first line as the likeliest of several, not the greedy one.

Greedy decoding commits to each token as it comes, and a model this small often ranks a wrong
first token above the one that starts the right line. The beam keeps `width` partial lines, each
a row of one encoder cache, and ends a hypothesis where the greedy lead would: at the end of the
middle (the stop tokens, with `lead.py`'s stop threshold) or at the line break that completes the
line. The finished line with the best length-normalised log-probability wins, and the greedy lead
goes on from it (the blank lines after it and the middle's end), so all after the first line is
decoded as before. Every step is one encoder pass over `width` single-token rows, which read the
prompt's cache in place and keep only their own tokens (`shared_prefix.py`).

With a `margin` the beam's line replaces the greedy one only when it scores more than `margin`
above it (the greedy line is found too, `width` 1): where the two are near, the beam's choice is
as often a longer line of near-certain tokens as a better one. On the 400 held-out holes (the
tenth piece, seed 0) the beam's line was right and the greedy one wrong nine times, by margins of
0.02 and 0.06 and then 0.73 to 4.91; the greedy line was never right where the beam's was wrong.
Any margin from 0.1 to 0.6 keeps seven of the nine (31 exact lines against the beam's 33 and the
greedy head's 24), and from 0.46 it also keeps `import time` above `from __future__ import
annotations`, which the beam alone prefers by 0.457 (`benchmarks/obvious.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from .autoregressive import next_token_logits
from .lead import Lead, Lines, extend, lead, looping
from .shared_prefix import encode_rows, prompt_layers

# How finished lines are ranked: their log-probability over (tokens + stop) ** ALPHA. On the 400
# held-out holes (seed 0, the tenth piece; greedy: 24 exact at 0.300 edit similarity) 0 favoured
# short lines (30 exact at 0.270 with four hypotheses), 0.1 a little less (31 at 0.289 with three),
# 1 long ones (19 at 0.281 with four), 0.5 neither (33 at 0.306 with three, 31 at 0.306 with two).
# A stop scored by its own probability instead of as certain past the threshold: 16 at 0.249.
ALPHA = 0.5


@dataclass
class Hypothesis:
    ids: list[int] = field(default_factory=list)
    logp: float = 0.0  # the head's log-probability of the ids, and of the stop when `stopped`
    confidences: list[float] = field(default_factory=list)
    stopped: bool = False  # the middle ends after the ids
    ended_line: bool = False  # the ids end the first line: the greedy lead goes on after them
    cut: bool = False  # the head looped (one copy kept) or reached `count`: the decoder writes on

    def score(self, alpha: float) -> float:
        """The log-probability per event (each token, and the stop), to the power `alpha`: 0 ranks by
        the whole line's probability, which favours short lines; 1 by its mean."""
        events = len(self.ids) + int(self.stopped)
        return self.logp / max(1, events) ** alpha


@torch.inference_mode()
def beam_line(model, hidden: torch.Tensor, cache, start: int, count: int, stop_ids, lines: Lines,
              first: torch.Tensor | None = None, stop_above: float = 1.0, width: int = 4,
              alpha: float = ALPHA) -> tuple[list[Hypothesis], int]:
    """The finished first lines, best first, and the encoder passes taken.

    `hidden` [1, 1, H] is the prompt's last hidden state, `cache` a one-row cache of its `start`
    tokens, which the hypotheses read and leave as it is. `first` [K], if
    given, holds the only tokens the first may be (`healing.py`). Each step ranks every live
    hypothesis's `width` likeliest tokens and its stop together and keeps the `width` best; a stop
    or a finished line leaves the beam, which ends when no hypothesis is left. A hypothesis may
    stop only where the greedy lead would: where a stop token is its likeliest (weighing what that
    token does) or the stop tokens together pass `stop_above` after some text (counted as
    certain). With `width` 1 this is the greedy lead, token for token."""
    stops = torch.tensor(sorted(stop_ids), device=hidden.device)
    prompt, tails = prompt_layers(cache), DynamicCache()  # tails: [K rows] of each hypothesis's own tokens
    live, done, passes = [Hypothesis()], [], 0
    for _ in range(count):
        probs = torch.softmax(next_token_logits(model, hidden).float(), -1)  # [K, V]
        pool = []  # (log-probability, row, token or None for the stop, probability)
        for row, hyp in enumerate(live):
            p = probs[row]
            if first is not None and not hyp.ids:
                allowed = torch.zeros_like(p)
                allowed[first] = p[first]
                p = allowed  # healing: only tokens that continue the taken-back text, never a stop
            else:
                p_stop = p[stops]
                certain = bool(hyp.ids) and float(p_stop.sum()) > stop_above
                if certain or float(p_stop.max()) >= float(p.max()):  # where the greedy lead would stop
                    stop_logp = 0.0 if certain else math.log(max(float(p_stop.max()), 1e-30))
                    pool.append((hyp.logp + stop_logp, row, None, float(p_stop.sum())))
                p = p.clone()
                p[stops] = 0.0
            top = torch.topk(p, width)
            pool += [(hyp.logp + math.log(float(v)), row, int(t), float(v))
                     for v, t in zip(top.values, top.indices) if float(v) > 0]
        pool.sort(key=lambda c: -c[0])
        survivors, rows = [], []
        for logp, row, token, prob in pool[:width]:
            parent = live[row]
            if token is None:
                done.append(Hypothesis(list(parent.ids), logp, list(parent.confidences), stopped=True))
                continue
            hyp = Hypothesis(parent.ids + [token], logp, parent.confidences + [prob])
            loop = looping(hyp.ids)
            if loop:  # as in the greedy lead: one copy kept, the decoder writes on
                del hyp.ids[-loop:], hyp.confidences[-loop:]
                hyp.cut = True
            else:
                hyp.ended_line = lines.ended(hyp.ids)
            if hyp.cut or hyp.ended_line:
                done.append(hyp)
            else:
                survivors.append(hyp)
                rows.append(row)
        live = survivors
        if not live or len(live[0].ids) >= count:
            break
        tails.reorder_cache(torch.tensor(rows, device=hidden.device))
        tokens = torch.tensor([h.ids[-1] for h in live])
        hidden = encode_rows(model, prompt, tails, tokens, start + len(live[0].ids) - 1)
        passes += 1
    for hyp in live:  # lines cut at `count` tokens, as the greedy lead cuts them
        hyp.cut = True
    done += live
    done.sort(key=lambda h: -h.score(alpha))
    return done or [Hypothesis(cut=True)], passes


def beam_lead(model, hidden: torch.Tensor, cache, start: int, count: int, stop_ids, lines: Lines,
              first: torch.Tensor | None = None, stop_above: float = 1.0, width: int = 4,
              alpha: float = ALPHA, margin: float = 0.0) -> Lead:
    """`lead.lead` with its first line chosen by `beam_line`; the same arguments and result. The
    one-row `cache` ends holding the prompt and the lead's tokens but the last, as `lead` leaves it.
    A `margin` above zero keeps the greedy line unless the beam's scores more than that above it
    (`math.inf`: always the greedy line, the beam only finding alternatives). The other finished
    lines, best first, are the result's `alternatives`."""
    hyps, passes = beam_line(model, hidden, cache, start, count, stop_ids, lines, first, stop_above, width, alpha)
    best = hyps[0]
    if margin > 0 and width > 1:
        greedy, more = beam_line(model, hidden, cache, start, count, stop_ids, lines, first, stop_above, 1, alpha)
        passes += more
        if best.score(alpha) - greedy[0].score(alpha) <= margin:
            best = greedy[0]
    others = [h for h in hyps if h.ids and (h.stopped or h.ended_line) and h.ids != best.ids]
    led = Lead(ids=best.ids, confidences=best.confidences, stopped=best.stopped, passes=passes,
               alternatives=[Lead(ids=h.ids, confidences=h.confidences, stopped=True) for h in others])
    if not best.ended_line or len(best.ids) >= count:
        return led
    # The blank lines after the line and the middle's end are the greedy lead's, from the line's end.
    hidden = extend(model, cache, best.ids, start)
    led.passes += 1
    return lead(model, hidden, cache, start, count, stop_ids, lines, None, stop_above, prior=led)
