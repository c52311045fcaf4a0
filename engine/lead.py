"""The first tokens of a fill from the encoder's next-token head; the decoder fills the rest.

Block-parallel training gives the encoder a next-token loss on every token, so the models it
trains are also small causal language models. The head judges a middle's first tokens better than
the decoder, which starts from all noise and commits several positions at once; that is where the
embedded model's fills go wrong (`formatter.formatter.formatterFormatter`). On the held-out holes
every training piece is scored on, four head tokens before the canvas lift exact match about
fourfold (`benchmarks/lead.py`, `benchmarks/results/lead.json`).

Only holes that end their line are led: a hole that closes inside a line must meet the text after
it, which a left-to-right head does not plan for. With four head tokens leading them, random spans
fell from 0.196 to 0.167 edit similarity on the 400 held-out holes and from 0.142 to 0.065 on the
quality benchmark's 60, while holes that end their line gained (HumanEval's single lines 0.335 to
0.402). Such a hole gets one head token only where it heals the prefix (`healing.py`): on 73
held-out random spans (seed 1) that took them from 0.199 to 0.222, where one unhealed token lost
(0.187). A head that writes on until its text meets the rest of the line (the first eight
characters after the cursor, outside any bracket it opened) did worse: 0.162 to 0.129 on 60
held-out random spans (seed 1), ending most of them early on a match that came too soon. Nor
does the head choose well between its own fill and the decoder's: on the 151 holes of the 400
held-out ones that close inside a line, taking the head's greedy fill (written to its stop)
wherever its log-probability, stop included, beat the decoder's fill's gave 0.147 edit similarity
against the decoder's 0.230 (a sum favours short and empty fills), and 0.208 with the mean per
token and empty fills left out.

A model directory opts in with `lead_config.json` (`{"lead_tokens": 4}`, or `{"lead_tokens": 32,
"lead_line": true}` for a head that writes the whole first line), written by the tuning that
measured it: a checkpoint trained on diffusion alone has no reason to have a useful head, so the
default is no lead. The head's tokens are greedy, each one a single-token encoder pass after
the prompt (with `"lead_beam": N` the first line is the best of N hypotheses: `beam.py`); the
canvas is then decoded against the prompt whose prefix ends with their text, so it starts right
after `<fim_middle>` as every middle's first block did in training.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .autoregressive import next_token_logits
from .denoise import StepCallback


@dataclass
class Lead:
    ids: list[int] = field(default_factory=list)
    confidences: list[float] = field(default_factory=list)  # the head's probability of each token
    stopped: bool = False  # the head ended the middle within its tokens: no canvas is needed
    passes: int = 0  # single-token encoder passes after the prompt's
    # Other whole first lines the beam found, best first (`beam.py`): a request for several
    # candidates gets them when the head ends the middle, since the greedy line would be repeated.
    alternatives: list[Lead] = field(default_factory=list)


def extend(model, cache, ids: list[int], start: int) -> torch.Tensor:
    """Encode `ids` at positions `start...` into `cache`; returns the last position's hidden [1, 1, H]."""
    device = model.device
    input_ids = torch.tensor([ids], dtype=torch.long, device=device)  # [1, T]
    positions = torch.arange(start, start + len(ids), device=device)[None]  # [1, T]
    out = model.model.encoder(input_ids=input_ids, past_key_values=cache, position_ids=positions, use_cache=True)
    return out.last_hidden_state[:, -1:]


@dataclass(frozen=True)
class Lines:
    """What a lead that writes a whole line needs to know of the tokenizer's text. This tokenizer
    joins a line break and the next line's indentation into one token, so a break's token may
    carry that indentation."""

    tokenizer: object

    def ended(self, ids: list[int]) -> bool:
        """Whether `ids` end with a line break after some text (not a middle's leading break)."""
        return "\n" in self.tokenizer.decode(ids[-1:]) and "\n" in self.tokenizer.decode(ids).lstrip()

    def blank(self, token: int) -> bool:
        return not self.tokenizer.decode([token]).strip()


@torch.inference_mode()
def lead(model, hidden: torch.Tensor, cache, start: int, count: int, stop_ids, lines: Lines | None = None,
         first: torch.Tensor | None = None, stop_above: float = 1.0, prior: Lead | None = None) -> Lead:
    """Up to `count` greedy head tokens after the prompt whose last hidden state is `hidden` [1, 1, H].

    `cache` (one row, the prompt's `start` tokens) takes each token that another is predicted
    from; the last one is left out, since the canvas's context is built apart (`Engine._led_context`).
    With `lines`, the head writes the fill's first line and the blank lines after it, then stops at
    the first token of the next line of text, which is the canvas's to write; a middle the head
    ends there needs no canvas. `first` [K], if given, holds the only tokens the first may be
    (`healing.py`). With `lines`, the middle also ends after a token once the stop tokens together
    have more than `stop_above` of the head's probability: a small model rarely ranks the end of a
    middle first, and when it does not, the canvas writes on past a line that was complete
    (`stop_threshold` says which fills get a threshold below 1). `prior` holds tokens already
    chosen (`beam.py`), which `cache` and `hidden` already hold: the lead goes on after them.
    """
    out = Lead() if prior is None else prior
    line_done = bool(lines is not None and out.ids and lines.ended(out.ids))
    stops = torch.tensor(sorted(stop_ids), device=hidden.device)
    for _ in range(count):
        probs = torch.softmax(next_token_logits(model, hidden), -1)[0]  # [V]
        if first is not None and not out.ids:
            token = int(first[probs[first].argmax()])
        else:
            token = int(probs.argmax())
        if token in stop_ids or (lines is not None and out.ids and float(probs[stops].sum()) > stop_above):
            out.stopped = True
            break
        if line_done and (len(out.ids) == count or not lines.blank(token)):
            break
        out.ids.append(token)
        out.confidences.append(float(probs[token]))
        if lines is not None:
            loop = looping(out.ids)
            if loop:
                # A greedy head that starts repeating itself (`= iterator = iterator = ...`) never
                # leaves the loop: one copy is kept and the decoder writes on from there.
                del out.ids[-loop:], out.confidences[-loop:]
                break
            line_done = line_done or lines.ended(out.ids)
        if len(out.ids) == count and not line_done:
            break
        hidden = extend(model, cache, [token], start + len(out.ids) - 1)
        out.passes += 1
    return out


def stop_threshold(request, lead_stop: float) -> float:
    """The stop threshold of a fill: `lead_stop`, except on a fresh line of a fill that may take
    several canvases (a code action's block), where only a stop token ranked first ends the middle.

    On a fresh line the threshold decides how many lines the fill has, and a whole line looks the
    same as the first of several. An inline fill (one canvas) shows a line, and there the threshold
    pays; a fill allowed several canvases is asked for a block. On the quality benchmark (seed 0),
    without the threshold on fresh lines the held-out multi-line holes (four canvases) rose from
    0.162 to 0.176 edit similarity and HumanEval's from 0.213 to 0.217, while HumanEval's single
    lines (one canvas) fell from 0.440 to 0.414 and pass@1 from 7.3% to 6.7%; on seed 1's
    multi-line holes the threshold cost 0.167 -> 0.151. After text on the cursor's line the server
    keeps a fill to the end of that line anyway, so there the threshold only saves the canvas.
    """
    fresh = not request.prefix.rpartition("\n")[2].strip()
    return 1.0 if fresh and request.max_canvases > 1 else lead_stop


def looping(ids: list[int], longest: int = 8) -> int:
    """How many of the last tokens repeat the ones before them, when `ids` end with a pattern of
    at most `longest` tokens written three times in a row (a single token four times); else 0.
    The count leaves one copy of the pattern."""
    for period in range(1, longest + 1):
        copies = 4 if period == 1 else 3
        tail = ids[-period * copies:]
        if len(tail) == period * copies and all(tail[i] == tail[i % period] for i in range(len(tail))):
            return period * (copies - 1)
    return 0


def led_steps(on_step: StepCallback | None, led: Lead) -> StepCallback | None:
    """A step callback whose draft canvases start with the head's tokens, as the fill will."""
    if on_step is None or not led.ids:
        return on_step

    def step(index: int, canvas: torch.Tensor) -> None:
        head = torch.tensor(led.ids, dtype=canvas.dtype, device=canvas.device).expand(canvas.shape[0], -1)
        on_step(index, torch.cat([head, canvas], -1))  # [N, lead + C]

    return step
