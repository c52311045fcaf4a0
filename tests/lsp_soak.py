"""A soak of mixed requests with cancellations, for tests/test_reliability_soak.py and the benchmark.

Operations are drawn from a seeded `random.Random`: inline completions, completions, code-action
lists and resolves, dg.status, and edits, on a few open documents; up to `window` requests are in
flight at once. A share of the model requests is cancelled right after it is sent. The server's
RSS (VmRSS in /proc) is read once the first `warmup` requests are answered and again near and at
the end, each time with nothing in flight. The warm-up runs every kind of operation in turn on documents of the largest
size they are kept to (they start over, at a random smaller size, when edits outgrow it), over a
fixed vocabulary: the allocators' high-water marks and the tokenizer's caches are reached during
the warm-up, and what grows after it is a leak, not the workload. (Measured over 4,000
operations, RSS climbs in steps for the first few hundred and is then flat.)

Each reading is taken after `dg.test.gc` has run Python's collector and glibc's `malloc_trim(0)`
(the server runs with DG_LSP_TEST_FAULTS=1, see dg_lsp/testfaults.py). Without the trim glibc keeps
freed blocks resident (its mmap threshold rises after each large block it frees, up to 32 MiB):
over the untrimmed runs made while writing this, growth was 0.1-7.9% (3 of 13 runs above 5%)
while the Python heap grew by about 1 MB. Even trimmed, the resting RSS of this ~400 MB process
switches between levels about 20 MB apart (one glibc arena of the compute thread holds more or
less for a while; a bounded cache, not a leak: over 4,000 operations the levels do not climb).
So the end figure is the least of the readings taken every 50 operations over the last fifth of
the run and at its end: a leak raises that floor, a cache that comes and goes does not. The
benchmark records the untrimmed figure too.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from raw_client import RawServer, inline_params, tiny_model_dir

# Lean: 2 steps on an 8-token canvas, and no syntax-repair rounds (more model calls of the same kind).
SOAK_SETTINGS = {"model": str(tiny_model_dir()), "maxSteps": 2, "canvasLength": 8, "syntaxRepair": False}
MAX_CHARS = 500
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
    rss_end_kib: int = 0  # the least of the readings over the last fifth (rss_late_kib)
    rss_late_kib: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def growth(self) -> float:
        return (self.rss_end_kib - self.rss_warm_kib) / self.rss_warm_kib


def soak(server: RawServer, root, total: int = 1000, cancels: int = 100, warmup: int = 100, window: int = 4,
         seed: int = 0, trim: bool = True) -> SoakResult:
    """Run the soak; `trim` (needs DG_LSP_TEST_FAULTS=1) reads RSS after gc + malloc_trim."""
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

    def measure(n: int, count: int = 1) -> int:
        """RSS at rest, right after the same kind of request on the same small document each time,
        so that what the last request leaves behind (caches keyed to it) is alike at both points;
        the least of `count` such readings."""
        settle(0)
        readings = []
        for k in range(count):
            version = 10 * n + k
            server.notify("textDocument/didChange", {"textDocument": {"uri": probe, "version": version},
                                                     "contentChanges": [{"text": CODE.replace("area", f"a{version:03d}")}]})
            server.wait_reply(server.request("textDocument/inlineCompletion", inline_params(probe, 4, 4)), 30)
            time.sleep(0.1)
            if trim:
                server.command("dg.test.gc", {"collect": True, "trim": True})
            readings.append(server.rss_kib())
        return min(readings)

    late: list[int] = []
    for i in range(total):
        if result.requests == warmup and not result.rss_warm_kib:
            result.rss_warm_kib = measure(2, count=3)
        if i >= total * 4 // 5 and i % 50 == 0:
            late.append(measure(4 + len(late)))
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
    late.append(measure(99))
    result.rss_late_kib = late
    result.rss_end_kib = min(late)
    result.seconds = time.perf_counter() - started
    return result
