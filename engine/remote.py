"""The remote backend: the engine's interface served by an OpenAI-compatible server (vLLM, SGLang).

A team shares one GPU server; each editor's language server then holds no model, only this
client. `RemoteEngine` answers the same calls as the local `Engine` (`fill`, `renoise`,
`draft_text`, `info`, `forward_passes`) with plain `/v1/completions` requests, so nothing above the
engine knows which backend runs:

* the prompt text is built here (`prompt.FimText`, with the served tokenizer's own sentinel
  spellings, found at connect time through the server's `/tokenize`), because servers refuse the
  `suffix` field for models without a FIM template; a model without sentinels gets the chat
  instruction through `/v1/chat/completions` instead;
* diffusion options travel in `vllm_xargs`: `diffusion_max_steps`, `diffusion_canvas_length`,
  and `diffusion_seed_canvas` + `diffusion_pinned` where a canvas starts from known tokens (a
  rewrite seeded with the current text, the known code between the holes of a joint fill, the
  clamped tokens of a syntax repair, and the suffix's first tokens after the free positions with
  `prompt_format = "pinned"`). Options that vLLM refuses for diffusion models
  (temperature, seed, min_p, logit_bias, ...) are never sent;
* every request streams, so drafts arrive per canvas and a cancelled request closes its
  connection at once (`remote_http`), which makes the server abort it.

Failures raise `RemoteError`s with a message a user can act on; the engine also keeps the
server's health for `dg.status`, without touching the network when asked for it.
"""

from __future__ import annotations

import os
import random
import re
import time

from .config import EngineConfig
from .engine import Candidate, FillRequest, FillResult
from .errors import ModelLoadError
from .prompt import PINNED_TOKENS, infill_instruction, rewrite_instruction
from .remote_http import JsonClient, RemoteError, RemoteResponseError, RemoteUnavailableError
from .remote_stream import Row, Served, TextRows, absorb, learn_format, to_candidate

DEFAULT_CANVAS = 32

class RemoteEngine:
    """The engine interface over an OpenAI-compatible server. Not thread-safe, like `Engine`."""

    def __init__(self, config: EngineConfig, client: JsonClient | None = None):
        self.config = config
        key = os.environ.get(config.api_key_env) if config.api_key_env else None
        self.client = client or JsonClient(config.base_url, key, config.timeout, config.connect_timeout, config.retries)
        self.base_url = config.base_url
        self.source = config.model
        self.served: Served | None = None
        self.forward_passes = 0  # generation requests sent; status reports it, tests watch it
        self.health = "unknown"
        self.health_message = ""
        self.last_request_ms: float | None = None

    # --- Connection and status --------------------------------------------------------------

    def connect(self, cancel=None) -> Served:
        """Ask the server for its models, version and tokenizer's sentinels; raises `RemoteError`."""
        try:
            models = self.client.get("/v1/models", cancel, timeout=self.config.connect_timeout + 2)
            names = [m.get("id") for m in models.get("data", []) if isinstance(m, dict)]
            if not names:
                raise RemoteResponseError(f"{self.base_url} serves no model")
            wanted = names[0] if self.config.model == "embedded" else self.config.model
            if wanted not in names:
                raise ModelLoadError(f"{self.base_url} does not serve '{wanted}' (it serves {', '.join(names)})")
            entry = next(m for m in models["data"] if m.get("id") == wanted)
            served = Served(model=wanted, max_model_len=int(entry.get("max_model_len") or 0))
            try:
                served.version = str(self.client.get("/version", cancel).get("version", ""))
            except RemoteResponseError:
                pass  # Not every server has /version.
            learn_format(served, lambda name: self.tokenize(name, cancel, served.model), self.config.prompt_format)
        except RemoteError as exc:
            self._down(exc)
            raise
        self.served = served
        self.source = served.model
        self._up()
        return served

    def _ready(self, cancel) -> Served:
        return self.served if self.served is not None else self.connect(cancel)

    def _up(self) -> None:
        self.health, self.health_message = "ok", ""

    def _down(self, exc: Exception) -> None:
        self.health = "unreachable" if isinstance(exc, RemoteUnavailableError) else "failing"
        self.health_message = str(exc)

    def info(self) -> dict:
        served = self.served
        return {
            "model": served.model if served else self.config.model,
            "backend": "remote",
            "device": self.base_url,
            "baseUrl": self.base_url,
            "health": self.health,
            "healthMessage": self.health_message,
            "serverVersion": served.version if served else "",
            "maxModelLen": served.max_model_len if served else 0,
            "format": ("fim" if served.fim else "chat") if served else "unknown",
            "canvasLength": self.canvas_length(FillRequest("")),
            "maxSteps": self.config.max_steps,
            "forwardPasses": self.forward_passes,
            "lastRequestMs": self.last_request_ms,
        }

    def canvas_length(self, request: FillRequest) -> int:
        return request.canvas_length or self.config.canvas_length or DEFAULT_CANVAS

    # --- Tokens --------------------------------------------------------------------------------

    def tokenize(self, text: str, cancel=None, model: str | None = None) -> list[int]:
        if not text:
            return []
        model = model or self.served.model
        answer = self.client.post("/tokenize", {"model": model, "prompt": text, "add_special_tokens": False}, cancel)
        return [int(t) for t in answer.get("tokens", [])]

    def detokenize(self, ids: list[int], cancel=None) -> str:
        if not ids:
            return ""
        return str(self.client.post("/detokenize", {"model": self.served.model, "tokens": ids}, cancel).get("prompt", ""))

    # --- Requests ------------------------------------------------------------------------------

    def fill(self, request: FillRequest, cancel=None, on_step=None) -> FillResult:
        started = time.perf_counter()
        try:
            served = self._ready(cancel)
            if self.config.prompt_format == "pinned" and request.seed_text is None and not request.segments:
                rows, prompt_tokens = self._pinned(served, request, cancel)
            elif served.fim is None:
                rows, prompt_tokens = self._chat(served, request, cancel, on_step)
            elif request.segments:
                rows, prompt_tokens = self._joint(served, request, cancel)
            elif request.seed_text is not None:
                rows, prompt_tokens = self._rewrite(served, request, cancel, on_step)
            elif request.lengths:
                rows, prompt_tokens = [], 0
                for length in sorted(set(request.lengths)):
                    more, prompt_tokens = self._complete(served, self._prompt(served, request), request, length, length,
                                                         cancel, None)
                    rows += more
            else:
                width = self.canvas_length(request)
                rows, prompt_tokens = self._complete(served, self._prompt(served, request), request, width,
                                                     width * max(1, request.max_canvases), cancel, on_step)
        except RemoteError as exc:
            self._down(exc)
            raise
        self._up()
        elapsed = (time.perf_counter() - started) * 1000
        self.last_request_ms = elapsed
        rows.sort(key=lambda c: (not c.finished, -c.mean_confidence))
        return FillResult(candidates=rows, prompt_tokens=prompt_tokens, reused_tokens=0, encoded_tokens=prompt_tokens,
                          prefill_ms=0.0, denoise_ms=elapsed, timings={"requestMs": elapsed})

    def _prompt(self, served: Served, request: FillRequest) -> str:
        return served.fim.infill(request.prefix, request.suffix, request.chunks)

    def _xargs(self, request: FillRequest, width: int) -> dict:
        xargs = {"diffusion_canvas_length": width}
        steps = request.max_steps or self.config.max_steps
        if steps:
            xargs["diffusion_max_steps"] = steps
        return xargs

    def _complete(self, served: Served, prompt: str, request: FillRequest, width: int, max_tokens: int, cancel,
                  on_step, seed: list[int] | None = None, pinned: list[int] | None = None) -> tuple[list[Candidate], int]:
        xargs = self._xargs(request, width)
        if seed is not None:
            xargs["diffusion_seed_canvas"] = seed
            if pinned:
                xargs["diffusion_pinned"] = pinned
        payload = {
            "model": served.model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "n": max(1, request.n),
            "stream": True,
            "return_token_ids": True,
            "logprobs": 0,
            "vllm_xargs": xargs,
            "stop_token_ids": served.stop_ids,
        }
        rows, prompt_tokens = self._stream("/v1/completions", payload, cancel, on_step)
        return [to_candidate(served, row, width) for row in rows], prompt_tokens

    def _stream(self, path: str, payload: dict, cancel, on_step) -> tuple[list[Row], int]:
        self.forward_passes += 1
        rows: dict[int, Row] = {}
        prompt_tokens = 0
        for step, event in enumerate(self.client.stream(path, payload, cancel)):
            if not isinstance(event, dict) or not isinstance(event.get("choices"), list):
                raise RemoteResponseError(f"{self.base_url} sent an event without choices: {str(event)[:200]}")
            for choice in event["choices"]:
                row = rows.setdefault(int(choice.get("index", 0)), Row())
                absorb(row, choice)
                prompt_tokens = max(prompt_tokens, len(choice.get("prompt_token_ids") or []))
            if on_step is not None and 0 in rows:
                on_step(step, TextRows(rows[0].text))
        if not rows:
            raise RemoteResponseError(f"{self.base_url} answered with no choices")
        return [rows[i] for i in sorted(rows)], prompt_tokens

    def _vocab_size(self, served: Served, cancel) -> int:
        """The served vocabulary's size, read from the server's own range check of a seed canvas
        (one request that fails validation, once); noise for free canvas positions is drawn from it."""
        if not served.vocab_size:
            probe = {"model": served.model, "prompt": "x", "max_tokens": 1,
                     "vllm_xargs": {"diffusion_canvas_length": 1, "diffusion_seed_canvas": [2**31 - 1]}}
            try:
                self.client.post("/v1/completions", probe, cancel)
            except RemoteResponseError as exc:
                found = re.search(r"\[0, (\d+)\)", str(exc))
                served.vocab_size = int(found.group(1)) if found else 0
            served.vocab_size = served.vocab_size or max(served.ids.values(), default=0) + 1
        return served.vocab_size

    def _noise(self, served: Served, count: int, seed: int, cancel) -> list[int]:
        """Uniform random tokens: how a diffusion canvas starts where nothing is known."""
        vocab = self._vocab_size(served, cancel)
        rng = random.Random(seed)
        specials = set(served.ids.values())
        out = []
        while len(out) < count:
            token = rng.randrange(vocab)
            if token not in specials or vocab <= len(specials):
                out.append(token)
        return out

    def _rewrite(self, served: Served, request: FillRequest, cancel, on_step):
        """A rewrite starts from the current text on the canvas, nothing pinned.

        The local engine re-noises the share of the text that the model finds least likely; a
        server does not show its logits, and re-noising a random share instead was measured to
        spoil the rewrite (benchmarks/results/remote_vllm.json: a correct line came back exactly
        0% of the time, against 73% with the plain seed), so `renoise_fraction` is not used here:
        the server's own sampler re-noises what it doubts.
        """
        prompt = self._prompt(served, request)
        ids = self.tokenize(request.seed_text, cancel)
        width = max(self.canvas_length(request), len(ids) + max(4, len(ids) // 4))
        stop = served.ids.get("end", served.ids.get("eos"))
        pad = served.ids.get("pad", stop)
        if stop is None:
            return self._complete(served, prompt, request, width, width, cancel, on_step)
        seed = ids + [stop] + [pad] * (width - len(ids) - 1)
        try:
            return self._complete(served, prompt, request, width, width, cancel, on_step, seed=seed)
        except RemoteResponseError as exc:
            if exc.status != 400:
                raise
            # Wider than the served canvas: the plain fill of the same hole is the best left to try.
            width = self.canvas_length(request)
            return self._complete(served, prompt, request, width, width, cancel, on_step)

    def _joint(self, served: Served, request: FillRequest, cancel):
        """Several holes on one canvas: the known text between them and the end are pinned."""
        stop = served.ids.get("end", served.ids.get("eos"))
        pad = served.ids.get("pad", stop)
        seed, pinned, holes = [], [], []
        for part in request.segments:
            if isinstance(part, int):
                holes.append((len(seed), len(seed) + part))
                seed += self._noise(served, part, request.seed + len(seed), cancel)
            else:
                ids = self.tokenize(part, cancel)
                pinned += range(len(seed), len(seed) + len(ids))
                seed += ids
        pinned.append(len(seed))
        seed.append(stop)
        width = max(self.canvas_length(request), len(seed))
        pinned += range(len(seed), width)
        seed += [pad] * (width - len(seed))
        rows, prompt_tokens = self._complete(served, self._prompt(served, request), request, width, width, cancel, None,
                                             seed=seed, pinned=pinned)
        stops = set(served.stop_ids)
        for cand in rows:
            cand.holes = [self.detokenize([t for t in cand.canvas[a:b] if t not in stops], cancel) for a, b in holes]
            end = next((i for i, t in enumerate(cand.canvas) if t == stop), len(cand.canvas))
            cand.text = self.detokenize([t for t in cand.canvas[:end] if t not in stops], cancel)
            cand.finished = True
        return rows, prompt_tokens

    def _pinned(self, served: Served, request: FillRequest, cancel):
        """The suffix pinned in the canvas, as the local engine lays it out (`PinnedFormat`): the
        code before the hole is the prompt; per middle length, that many free positions, then the
        suffix's first tokens and the end token, all pinned. Each row's middle is its free stretch."""
        stop = served.ids.get("end", served.ids.get("eos"))
        head = self.tokenize(request.suffix, cancel)[:PINNED_TOKENS] + ([] if stop is None else [stop])
        prompt = "".join(f"{chunk}\n\n" for chunk in request.chunks) + request.prefix
        base = self.canvas_length(request)
        stops = set(served.stop_ids)
        rows, prompt_tokens = [], 0
        for free in sorted(set(request.lengths or (max(4, base // 2), base))):
            seed = self._noise(served, free, request.seed + free, cancel) + head
            more, prompt_tokens = self._complete(served, prompt, request, len(seed), len(seed), cancel, None, seed=seed,
                                                 pinned=list(range(free, len(seed))))
            for cand in more:
                middle = (cand.canvas or cand.token_ids)[:free]
                end = next((i for i, t in enumerate(middle) if t in stops), len(middle))
                cand.text = self.detokenize(middle[:end], cancel)
                cand.token_ids, cand.token_offsets = middle[:end], []
                cand.confidences = cand.confidences[:end]
                cand.finished = True
            rows += more
        return rows, prompt_tokens

    def _chat(self, served: Served, request: FillRequest, cancel, on_step):
        if request.seed_text is not None:
            content = rewrite_instruction(request.prefix, request.seed_text, request.suffix, request.instruction,
                                          request.chunks)
        else:
            content = infill_instruction(request.prefix, request.suffix, request.chunks)
        width = self.canvas_length(request)
        payload = {
            "model": served.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": width * max(1, request.max_canvases),
            "n": max(1, request.n),
            "stream": True,
            "vllm_xargs": self._xargs(request, width),
        }
        rows, prompt_tokens = self._stream("/v1/chat/completions", payload, cancel, on_step)
        return [to_candidate(served, row, width) for row in rows], prompt_tokens

    def renoise(self, request: FillRequest, candidate: Candidate, positions: list[int], cancel=None) -> Candidate:
        """Denoise `positions` again with the rest of the candidate's canvas pinned (syntax repair)."""
        served = self._ready(cancel)
        width = len(candidate.canvas)
        free = {p for p in positions if 0 <= p < width}
        if served.fim is None or not width or not free:
            return candidate
        pinned = [i for i in range(width) if i not in free]
        try:
            seed = list(candidate.canvas)
            for position, token in zip(sorted(free), self._noise(served, len(free), request.seed + 1, cancel)):
                seed[position] = token
            rows, _ = self._complete(served, self._prompt(served, request), FillRequest("", max_steps=request.max_steps),
                                     width, width, cancel, None, seed=seed, pinned=pinned)
        except RemoteError as exc:
            self._down(exc)
            raise
        return rows[0] if rows else candidate

    def draft_text(self, canvas_row) -> str:
        """The draft text of a streamed step (`TextRows` already carries text)."""
        return canvas_row if isinstance(canvas_row, str) else ""

def connect(config: EngineConfig) -> RemoteEngine:
    """A remote engine for `config`. An unreachable server is not an error here: the engine
    reports it in its health and each request tries again, so the server may come up later."""
    engine = RemoteEngine(config)
    try:
        engine.connect()
    except RemoteUnavailableError:
        pass
    except RemoteResponseError as exc:
        if exc.status in (401, 403):
            raise ModelLoadError(f"{config.base_url} refused the API key from ${config.api_key_env}: {exc}") from exc
    return engine
