"""Random LSP sessions for the protocol fuzzer (tests/test_fuzz_protocol.py) and the benchmark.

`session(rng, ...)` turns a `random.Random` into a list of `Input`s: the bytes of one write each,
and the id that must get a reply, if any. Hypothesis drives it through `st.randoms()`; the
benchmark through a seeded `random.Random`. Inputs mix well-formed requests and notifications
with random params (positions past the end, of the wrong type, huge), edit scripts on a pool of
documents (emoji, CJK, combining marks, odd URIs), random JSON, corrupted JSON, and broken framing
(garbage between frames, bad or missing Content-Length, too-short lengths, odd header spelling,
frames split or batched in one write).

Not generated, on purpose: `shutdown` and `exit` (they end the session; the lifecycle tests cover
them), settings that make the model slow or choose the model (the fuzzer looks for crashes and
lost replies, not for slow configurations), messages over the size cap, and a Content-Length
larger than its body (the server cannot tell it from a slow client; see dg_lsp/framing.py).

`FuzzRunner` writes the inputs to a `RawServer`, waits for every required reply, and counts
crashes (restarting the server), requests left without a reply and replies slower than 5 s.
"""

from __future__ import annotations

import itertools
import json
import random
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from raw_client import RawServer, frame, reliability_env, tiny_model_dir

STALL_S = 5.0

PIECES = ["def ", "f", "(x)", ":\n", "    ", "return ", "x", " + ", "1", "\n", "\r\n", "\r", "😀", "👍🏽", "日本語",
          "e\u0301", "\t", "# TODO(dg)\n", "'''doc'''\n", "{", "}", "\\", '"', "\u2028", "class A:\n", "pass\n"]
LANGUAGES = ["python"] * 6 + ["markdown", "rust", "javascript", "plaintext", "", "x" * 300]
KNOWN_REQUESTS = ["textDocument/inlineCompletion", "textDocument/completion", "textDocument/codeAction",
                  "codeAction/resolve", "workspace/executeCommand", "textDocument/inlayHint"]
OTHER_REQUESTS = ["textDocument/hover", "textDocument/definition", "workspace/symbol", "completionItem/resolve",
                  "workspace/applyEdit", "initialize", "$/cancelRequest", "textDocument/didOpen", "dg/unknown",
                  "$/unknownRequest", "", "x" * 1000]
NOTIFICATIONS = ["textDocument/didOpen", "textDocument/didChange", "textDocument/didClose", "textDocument/didSave",
                 "$/cancelRequest", "workspace/didChangeConfiguration", "$/setTrace", "$/progress", "dg/whatever",
                 "initialized", "textDocument/completion"]
COMMANDS = ["dg.status", "dg.documentHash", "dg.infill", "dg.rewriteParagraph", "dg.noSuch", ""]


@dataclass
class Input:
    data: bytes
    must: object = None  # an id that must get a reply
    maybe: object = None  # an id that may get a reply (broken JSON whose id is still readable)
    kind: str = ""


@dataclass
class Session:
    rng: random.Random
    root: str
    ids: itertools.count
    uris: list = field(default_factory=list)
    sent: list = field(default_factory=list)

    # --- values --------------------------------------------------------------------------------

    def text(self, max_pieces: int = 40) -> str:
        text = "".join(self.rng.choice(PIECES) for _ in range(self.rng.randint(0, max_pieces)))
        if self.rng.random() < 0.03:
            text += "\x00"  # a binary document
        return text

    def number(self):
        r = self.rng.random()
        if r < 0.7:
            return self.rng.randint(0, 6)
        if r < 0.8:
            return self.rng.randint(0, 2**31 - 1)
        return self.rng.choice([-1, 2**31, 2**63, 1.5, "3", None, True, [], {}])

    def position(self):
        if self.rng.random() < 0.05:
            return self.rng.choice(["line 1", None, [], {"line": 0}])
        return {"line": self.number(), "character": self.number()}

    def range(self):
        return {"start": self.position(), "end": self.position()}

    def uri(self) -> str:
        r = self.rng.random()
        if r < 0.85:  # the documents every session opens (and earlier sessions may have edited)
            return f"{self.root}/doc{self.rng.randint(0, 3)}.py"
        return self.rng.choice([f"{self.root}/../outside.py", f"{self.root}/nul%00.py", "untitled:Untitled-1",
                                "file://[broken/x.py", "http://example.com/a.py", "", "not a uri",
                                f"{self.root}/" + "a" * 300 + ".md"])

    def junk(self, depth: int = 0):
        r = self.rng.random()
        if depth > 3 or r < 0.4:
            return self.rng.choice([None, True, 0, -1, 1e300, "", "x", "😀", 2**70, "\x00", {"id": 1}])
        if r < 0.7:
            return [self.junk(depth + 1) for _ in range(self.rng.randint(0, 3))]
        return {self.rng.choice(["id", "method", "params", "uri", "a", "textDocument"]): self.junk(depth + 1)
                for _ in range(self.rng.randint(0, 3))}

    # --- messages --------------------------------------------------------------------------------

    def request_params(self, method: str):
        uri = self.uri()
        doc = {"uri": uri}
        if self.rng.random() < 0.1:
            return self.junk()
        if method == "textDocument/inlineCompletion":
            return {"textDocument": doc, "position": self.position(),
                    "context": {"triggerKind": self.rng.choice([1, 2, 3])}}
        if method in ("textDocument/completion", "textDocument/hover", "textDocument/definition"):
            return {"textDocument": doc, "position": self.position()}
        if method in ("textDocument/codeAction",):
            context = {"diagnostics": []}
            if self.rng.random() < 0.3:
                context["only"] = [self.rng.choice(["refactor", "refactor.rewrite", "quickfix", "refactor.dg.fill"])]
            return {"textDocument": doc, "range": self.range(), "context": context}
        if method == "textDocument/inlayHint":
            return {"textDocument": doc, "range": self.range()}
        if method == "codeAction/resolve":
            data = {"uri": uri, "version": self.rng.choice([None, 1, 2, self.number()]),
                    "mode": self.rng.choice(["fim", "holes", "body", "rewrite", "other"]), "range": self.range()}
            return {"title": "DG: Fill", "kind": "refactor.dg.fill", "data": self.rng.choice([data, data, self.junk()])}
        if method == "workspace/executeCommand":
            arg = {"uri": uri, "range": self.range(), "position": self.position(),
                   "mode": self.rng.choice(["fim", "holes", "body", "rewrite", "nope"])}
            return {"command": self.rng.choice(COMMANDS), "arguments": self.rng.choice([[arg], [], [self.junk()], None])}
        return self.junk()

    def notification_params(self, method: str):
        uri = self.uri()
        if method == "textDocument/didOpen":
            if uri not in self.uris:
                self.uris.append(uri)
            return {"textDocument": {"uri": uri, "languageId": self.rng.choice(LANGUAGES),
                                     "version": self.rng.randint(0, 100), "text": self.text(200)}}
        if method == "textDocument/didChange":
            changes = []
            for _ in range(self.rng.randint(0, 4)):
                if self.rng.random() < 0.15:
                    changes.append({"text": self.text(80)})
                else:
                    changes.append({"range": self.range(), "text": self.text(8)})
            return {"textDocument": {"uri": uri, "version": self.number()}, "contentChanges": changes}
        if method in ("textDocument/didClose", "textDocument/didSave"):
            return {"textDocument": {"uri": uri}}
        if method == "$/cancelRequest":
            return {"id": self.rng.choice(self.sent[-5:] or [0]) if self.rng.random() < 0.8 else self.junk()}
        if method == "workspace/didChangeConfiguration":
            safe = {"candidates": self.rng.choice([1, 2, 3, 0, 99, "two"]),
                    "confidence": {"threshold": self.rng.choice([0.1, 0.9, -1, "high"]),
                                   "display": self.rng.choice(["diagnostics", "inlayHints", "off", "sideways"])},
                    "inlineEnabled": self.rng.choice([True, "yes"]), "crossFileContext": self.rng.choice([True, False]),
                    "drafts": self.rng.choice([True, False]), "maxCanvases": self.rng.choice([1, 2, 4, -1]),
                    "languages": self.rng.choice([["python", "markdown"], "python", [1]]),
                    "holeMarkers": self.rng.choice([["TODO(dg)"], [""], None]), "unknownKey": self.junk()}
            picked = dict(self.rng.sample(sorted(safe.items()), self.rng.randint(0, 4)))
            return {"settings": self.rng.choice([{"dgLsp": picked}, picked, self.junk()])}
        return self.junk()

    def request(self) -> dict:
        method = self.rng.choice(KNOWN_REQUESTS * 4 + OTHER_REQUESTS)
        msg_id = next(self.ids)
        if self.rng.random() < 0.3:
            msg_id = f"s-{msg_id}"
        self.sent.append(msg_id)
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if self.rng.random() < 0.95:
            message["params"] = self.request_params(method)
        if self.rng.random() < 0.03:
            message["jsonrpc"] = self.rng.choice(["1.0", None, 2])
        return message

    def notification(self) -> dict:
        method = self.rng.choice(NOTIFICATIONS)
        return {"jsonrpc": "2.0", "method": method, "params": self.notification_params(method)}

    # --- framing ---------------------------------------------------------------------------------

    def garbage(self) -> bytes:
        alphabet = b"abcxyz{}[]\":, \r\n\t\x00\xff\xfe"
        return bytes(self.rng.choice(alphabet) for _ in range(self.rng.randint(1, 60)))

    def framed(self, body: bytes) -> bytes:
        r = self.rng.random()
        if r < 0.85:
            return frame(body)
        if r < 0.9:
            return b"content-length:%d\n\n%s" % (len(body), body)
        if r < 0.95:
            return b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        return b"Content-Length:   %d  \r\nX-Extra: 1\r\n\r\n%s" % (len(body), body)

    def one(self) -> Input:
        r = self.rng.random()
        if r < 0.45:
            message = self.request()
            return Input(self.framed(json.dumps(message).encode()), must=message["id"], kind="request")
        if r < 0.75:
            return Input(self.framed(json.dumps(self.notification()).encode()), kind="notification")
        if r < 0.80:
            value = self.junk()
            maybe = None
            if isinstance(value, dict) and "id" in value:
                value["id"] = maybe = f"j-{next(self.ids)}"  # ids must stay unique to spot double replies
            return Input(frame(json.dumps(value).encode()), maybe=maybe, kind="random json")
        if r < 0.87:
            message = self.request()
            body = json.dumps(message).encode()
            cut = self.rng.randint(0, len(body) - 1)
            broken = self.rng.choice([body[:cut], body[:cut] + self.garbage() + body[cut:], body.replace(b'"', b"'", 1)])
            try:
                json.loads(broken)
                broken = body[:cut]  # the garbage left valid JSON (e.g. a space inside a string): truncate
            except ValueError:
                pass
            return Input(frame(broken), maybe=message["id"], kind="broken json")
        if r < 0.93:
            return Input(self.garbage(), kind="garbage")
        if r < 0.97:
            message = self.request()
            bad = self.rng.choice([b"abc", b"-1", b"", b"1e3", b"0x10", b"99999999999999999999999"])
            return Input(b"Content-Length: %s\r\n\r\n%s" % (bad, json.dumps(message).encode()), maybe=message["id"],
                         kind="bad length")
        message = self.request()
        body = json.dumps(message).encode()
        return Input(b"Content-Length: %d\r\n\r\n%s" % (self.rng.randint(0, len(body) - 1), body), maybe=message["id"],
                     kind="short length")


def session(rng: random.Random, root: str, ids: itertools.count, size: int) -> list[Input]:
    s = Session(rng, root, ids)
    uri = f"{root}/doc{rng.randint(0, 3)}.py"
    opening = {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": "def area(w, h):\n    \n\nx = 😀 + 1\n" + s.text(30)}}}
    return [Input(frame(json.dumps(opening).encode()), kind="notification")] + [s.one() for _ in range(size - 1)]


@dataclass
class Stats:
    inputs: int = 0
    sessions: int = 0
    requests: int = 0
    replies: int = 0
    null_replies: int = 0
    crashes: int = 0
    unreplied: int = 0
    stalls: int = 0
    duplicate_or_unknown_replies: int = 0
    handler_errors: int = 0  # "Error in server" messages: a notification handler raised
    slowest_reply_s: float = 0.0
    problems: list = field(default_factory=list)

    def ok(self) -> bool:
        return not (self.crashes or self.unreplied or self.stalls or self.duplicate_or_unknown_replies
                    or self.handler_errors)


class FuzzRunner:
    """One long-lived server; restarted (and counted as a crash) if it dies."""

    def __init__(self, root: Path):
        self.root = root
        self.stats = Stats()
        self.ids = itertools.count(1_000_000)
        self.server: RawServer | None = None
        self.start()

    def start(self) -> None:
        self._errors_seen = 0
        self.server = RawServer(reliability_env())
        self.server.initialize({"model": str(tiny_model_dir()), "maxSteps": 2, "canvasLength": 8}, root=self.root)
        status = self.server.wait_ready()
        assert status["state"] == "ready", status

    def run(self, inputs: list[Input]) -> None:
        server = self.server
        pending: dict = {}
        seen_unmatched = len(server.unmatched)
        for item in inputs:
            for key in (item.must, item.maybe):
                if key is not None:
                    server.expect(key)
            with server._write_lock:
                try:
                    if self.rng_split(item):
                        half = len(item.data) // 2
                        server.proc.stdin.write(item.data[:half])
                        server.proc.stdin.flush()
                        server.proc.stdin.write(item.data[half:])
                    else:
                        server.proc.stdin.write(item.data)
                    server.proc.stdin.flush()
                except (BrokenPipeError, OSError):
                    break
            if item.must is not None:
                pending[item.must] = time.perf_counter()
                self.stats.requests += 1
            self.stats.inputs += 1
        sync = server.request("workspace/executeCommand", {"command": "dg.status", "arguments": []})
        pending[sync] = time.perf_counter()
        for msg_id, sent in pending.items():
            try:
                server.wait_reply(msg_id, timeout=max(0.05, sent + STALL_S - time.perf_counter()))
                self.stats.replies += 1
                self.stats.slowest_reply_s = max(self.stats.slowest_reply_s, server.reply_times[msg_id] - sent)
            except TimeoutError:
                if not server.alive():
                    break
                self.stats.stalls += 1
                try:
                    server.wait_reply(msg_id, timeout=10)
                except TimeoutError:
                    self.stats.unreplied += 1
                    self.stats.problems.append(f"no reply to {msg_id!r}")
        self.stats.sessions += 1
        self.stats.null_replies = len(server.null_replies)
        extra = server.unmatched[seen_unmatched:]
        if extra:
            self.stats.duplicate_or_unknown_replies += len(extra)
            self.stats.problems.append(f"unexpected replies: {extra[:3]}")
        errors = [m for m in server.messages("window/showMessage") if m.startswith("Error in server")]
        if len(errors) > self._errors_seen:
            self.stats.handler_errors += len(errors) - self._errors_seen
            self.stats.problems.append(f"notification handlers raised: {errors[self._errors_seen:][:3]}")
            self._errors_seen = len(errors)
        if not server.alive():
            self.stats.crashes += 1
            self.stats.problems.append(f"server died (exit {server.proc.returncode}):\n{server.stderr()}")
            server.close()
            self.start()

    @staticmethod
    def rng_split(item: Input) -> bool:
        return len(item.data) > 40 and zlib.crc32(item.data) % 10 == 0

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
