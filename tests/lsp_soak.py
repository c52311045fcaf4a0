"""A soak of mixed requests with cancellations, for tests/test_reliability_soak.py and the benchmark.

Operations are drawn from a seeded `random.Random`: inline completions, completions, code-action
lists and resolves, dg.status, and edits, on a few open documents; up to `window` requests are in
flight at once. A share of the model requests is cancelled right after it is sent. The server's
RSS (VmRSS in /proc) is read once the first `warmup` requests are answered and again at the end, each time with
nothing in flight. The warm-up runs every kind of operation in turn on documents of the largest
size they are kept to (they start over, at a random smaller size, when edits outgrow it), over a
fixed vocabulary: the allocators' high-water marks and the tokenizer's caches are reached during
the warm-up, and what grows after it is a leak, not the workload. (Measured over 4,000
operations, RSS climbs in steps for the first few hundred and is then flat.)

`SOAK_ENV` fixes glibc's mmap threshold at 4 MiB for the server. By default glibc raises the
threshold after each large block it frees, up to 32 MiB, so that later blocks of that size come
from the heap and stay resident after they are freed: RSS then moves in steps of 10-30 MB on a
~440 MB process whatever the server does. Over the runs made while writing this (1,000
operations each, fresh server), growth was 0.1-7.9% with the defaults (3 of 13 runs above 5%)
and 0.1-4.6% with the threshold fixed (16 runs); the Python heap itself grew by about 1 MB.
The benchmark records both.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from raw_client import RawServer, inline_params

SOAK_ENV = {"MALLOC_MMAP_THRESHOLD_": str(4 * 1024 * 1024)}
MAX_CHARS = 700
KINDS = ["inline", "completion", "actions", "resolve", "status", "edit"]
CODE = ("import os\n\n\ndef area(width, height):\n    \n\n\nclass Shape:\n    def __init__(self, name):\n"
        "        self.name = name\n\n    def describe(self):\n        # TODO(dg)\n        pass\n")


FILLER = ["total = compute(width, 'é😀')\n", "names = [shape.name for shape in shapes]\n",
          "if total > limit:\n    raise ValueError(total)\n", "# 日本語 comment\n"]


def sized(rng: random.Random, full: bool = False) -> str:
    """CODE padded to a random size up to MAX_CHARS, from a fixed vocabulary (caches saturate)."""
    target = MAX_CHARS if full else rng.randint(len(CODE), MAX_CHARS)
    text = CODE
    while len(text) + 50 < target:
        text += rng.choice(FILLER)
    return text


@dataclass
class SoakResult:
    operations: int = 0
    requests: int = 0
    cancels_sent: int = 0
    cancelled_replies: int = 0
    errors: dict = field(default_factory=dict)
    unreplied: int = 0
    rss_warm_kib: int = 0
    rss_end_kib: int = 0
    seconds: float = 0.0

    @property
    def growth(self) -> float:
        return (self.rss_end_kib - self.rss_warm_kib) / self.rss_warm_kib


def soak(server: RawServer, root, total: int = 1000, cancels: int = 100, warmup: int = 100, window: int = 4,
         seed: int = 0) -> SoakResult:
    rng = random.Random(seed)
    result = SoakResult()
    uris = [(root / f"soak{i}.py").as_uri() for i in range(4)]
    texts = {uri: sized(rng, full=warmup > 0) for uri in uris}  # the warm-up sees the longest prompts
    versions = {uri: 1 for uri in uris}
    for uri in uris:
        server.open(uri, texts[uri])
    model_ops = {"inline", "completion", "resolve"}
    cancel_at = set(rng.sample(range(total), min(total, cancels * 4)))  # candidates; model ops only count
    in_flight: list = []
    started = time.perf_counter()

    def settle(limit: int) -> None:
        while len(in_flight) > limit:
            msg_id = in_flight.pop(0)
            try:
                reply = server.wait_reply(msg_id, 30)
            except TimeoutError:
                result.unreplied += 1
                continue
            code = reply.get("error", {}).get("code")
            if code == -32800:
                result.cancelled_replies += 1
            elif code is not None:
                result.errors[code] = result.errors.get(code, 0) + 1

    probe = (root / "soak-probe.py").as_uri()
    server.open(probe, CODE)

    def measure(n: int) -> int:
        """RSS at rest, right after the same kind of request on the same small document each time,
        so that what the last request leaves behind (caches keyed to it) is alike at both points;
        the least of three such readings, so that one transient allocation does not count."""
        settle(0)
        readings = []
        for k in range(3):
            version = 10 * n + k
            server.notify("textDocument/didChange", {"textDocument": {"uri": probe, "version": version},
                                                     "contentChanges": [{"text": CODE.replace("area", f"a{version:03d}")}]})
            server.wait_reply(server.request("textDocument/inlineCompletion", inline_params(probe, 4, 4)), 30)
            time.sleep(0.1)
            readings.append(server.rss_kib())
        return min(readings)

    for i in range(total):
        if result.requests == warmup and not result.rss_warm_kib:
            result.rss_warm_kib = measure(2)
        uri = rng.choice(uris)
        if result.requests < warmup:  # every kind of operation, in turn: all code paths get warm
            op = KINDS[i % len(KINDS)]
        else:
            op = rng.choices(KINDS, [20, 10, 20, 4, 16, 30])[0]
        text = texts[uri]
        line = rng.randint(0, text.count("\n"))
        character = rng.randint(0, 12)
        position = {"line": line, "character": character}
        msg_id = None
        if op == "inline":
            msg_id = server.request("textDocument/inlineCompletion", inline_params(uri, line, character))
        elif op == "completion":
            msg_id = server.request("textDocument/completion", {"textDocument": {"uri": uri}, "position": position})
        elif op == "actions":
            msg_id = server.request("textDocument/codeAction", {"textDocument": {"uri": uri},
                                                                "range": {"start": position, "end": position},
                                                                "context": {"diagnostics": []}})
        elif op == "resolve":
            action = {"title": "DG: Fill in the middle here", "kind": "refactor.dg.fill",
                      "data": {"uri": uri, "version": versions[uri], "mode": "fim",
                               "range": {"start": position, "end": position}}}
            msg_id = server.request("codeAction/resolve", action)
        elif op == "status":
            msg_id = server.request("workspace/executeCommand", {"command": "dg.status", "arguments": []})
        else:
            versions[uri] += 1
            insert = rng.choice(["x", "\n", "    return width * height\n", "😀", "é", ""])
            lines = text.split("\n")
            line = min(line, len(lines) - 1)
            character = min(character, len(lines[line]))
            offset = sum(len(l) + 1 for l in lines[:line]) + character
            if len(text) > MAX_CHARS:  # start over
                texts[uri] = text = sized(rng)
                server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": versions[uri]},
                                                         "contentChanges": [{"text": text}]})
            else:
                texts[uri] = text[:offset] + insert + text[offset:]
                server.notify("textDocument/didChange", {
                    "textDocument": {"uri": uri, "version": versions[uri]},
                    "contentChanges": [{"range": {"start": {"line": line, "character": character},
                                                  "end": {"line": line, "character": character}}, "text": insert}]})
        result.operations += 1
        if msg_id is not None:
            result.requests += 1
            if op in model_ops and i in cancel_at and result.cancels_sent < cancels:
                server.cancel(msg_id)
                result.cancels_sent += 1
            in_flight.append(msg_id)
            settle(window)
    result.rss_end_kib = measure(3)
    result.seconds = time.perf_counter() - started
    return result
