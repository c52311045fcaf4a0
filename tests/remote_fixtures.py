"""Recorded exchanges with a real vLLM, and a local HTTP server that replays them or misbehaves.

`make test-vllm` runs the remote backend against a real vLLM with a `Recorder` around its HTTP
client and writes every exchange to `tests/fixtures/vllm/<name>.json`. The default suite then
starts a `FakeServer` on 127.0.0.1 that answers the same requests with the recorded answers
(streams included) and keeps every request it was sent, so a test can check that the backend
still builds exactly the requests that the real server accepted. The same server can refuse to
answer, hang, fail with a status, send malformed JSON or stream slowly, for the failure tests.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "vllm"


class Recorder:
    """Wraps a `JsonClient`; every exchange (request and answer, or stream events) is kept."""

    def __init__(self, client):
        self.client = client
        self.exchanges: list[dict] = []

    def install(self, engine) -> "Recorder":
        engine.client = self
        return self

    def __getattr__(self, name):
        return getattr(self.client, name)

    def _call(self, method, path, payload, fn):
        entry = {"method": method, "path": path, "body": payload}
        try:
            entry["response"], entry["status"] = fn(), 200
        except Exception as exc:
            entry["status"] = getattr(exc, "status", 0)
            entry["error"] = str(exc)
            self.exchanges.append(entry)
            raise
        self.exchanges.append(entry)
        return entry["response"]

    def get(self, path, cancel=None, timeout=None):
        return self._call("GET", path, None, lambda: self.client.get(path, cancel, timeout))

    def post(self, path, payload, cancel=None, timeout=None):
        return self._call("POST", path, payload, lambda: self.client.post(path, payload, cancel, timeout))

    def stream(self, path, payload, cancel=None, timeout=None):
        entry = {"method": "POST", "path": path, "body": payload, "status": 200, "events": []}
        self.exchanges.append(entry)
        try:
            for event in self.client.stream(path, payload, cancel, timeout):
                entry["events"].append(event)
                yield event
        except Exception as exc:
            entry["status"] = getattr(exc, "status", 0)
            entry["error"] = str(exc)
            raise

    def save(self, name: str, note: str = "") -> Path:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        path = FIXTURES / f"{name}.json"
        path.write_text(json.dumps({"note": note, "exchanges": self.exchanges}, indent=1) + "\n")
        return path


def load(name: str) -> list[dict]:
    return json.loads((FIXTURES / f"{name}.json").read_text())["exchanges"]


def _key(method: str, path: str, body) -> tuple:
    if path in ("/tokenize", "/detokenize") and isinstance(body, dict):
        return (method, path, json.dumps(body.get("prompt", body.get("tokens")), sort_keys=True))
    return (method, path)


class FakeServer:
    """A local OpenAI-compatible server made of recorded exchanges, or of a failure `mode`.

    Modes: "replay" (default), "hang" (accept, read, never answer), "status" (answer `status`
    with `body`), "malformed" (200 with a body that is not JSON), "slow-stream" (200, a stream
    that sends one event and then waits until the client goes away), "canvas" (a stand-in for a
    diffusion model without FIM sentinels that speaks vLLM's canvas options: one token per
    character, and every free canvas position answered with `x`, the pinned ones kept, so a
    test sees exactly which layout reached the server).
    """

    def __init__(self, exchanges: list[dict] | None = None, mode: str = "replay", status: int = 500,
                 body: bytes = b'{"error": {"message": "boom"}}'):
        self.mode, self.status, self.body = mode, status, body
        self.by_key: dict[tuple, list[dict]] = {}
        for exchange in exchanges or []:
            self.by_key.setdefault(_key(exchange["method"], exchange["path"], exchange["body"]), []).append(exchange)
        self.requests: list[dict] = []
        self.disconnected = threading.Event()
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                fake._handle(self, "GET", None)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                fake._handle(self, "POST", body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FakeServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def completions(self) -> list[dict]:
        return [r for r in self.requests if r["path"].endswith("completions")]

    def _handle(self, handler, method: str, body) -> None:
        path = handler.path
        self.requests.append({"method": method, "path": path, "body": body,
                              "authorization": handler.headers.get("Authorization")})
        if self.mode == "hang":
            self.release.wait(30)
            return
        if self.mode == "status":
            return self._send(handler, self.status, self.body)
        if self.mode == "malformed":
            return self._send(handler, 200, b'{"choices": [')
        if self.mode == "slow-stream" and path.endswith("completions"):
            return self._slow_stream(handler)
        if self.mode == "canvas":
            return self._canvas(handler, path, body)
        queue = self.by_key.get(_key(method, path, body)) or []
        if not queue:
            return self._send(handler, 404, json.dumps({"error": {"message": f"no recording for {method} {path}"}}).encode())
        exchange = queue.pop(0) if len(queue) > 1 else queue[0]
        if "events" in exchange:
            handler.send_response(exchange["status"])
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Connection", "close")
            handler.end_headers()
            for event in exchange["events"]:
                handler.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.close_connection = True
            return
        if exchange["status"] != 200:
            return self._send(handler, exchange["status"], json.dumps({"error": {"message": exchange.get("error", "")}}).encode())
        self._send(handler, 200, json.dumps(exchange["response"]).encode())

    def _send(self, handler, status: int, body: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    # The canvas stand-in's vocabulary: a few special tokens, then one token per character.
    SPECIAL = {"<pad>": 0, "<eos>": 1, "<bos>": 2}
    VOCAB = 3 + 0x250

    def _canvas(self, handler, path: str, body) -> None:
        def text(ids):
            return "".join(chr(t - 3) for t in ids if t >= 3)

        if path.endswith("/models"):
            answer = {"data": [{"id": "canvas-model", "max_model_len": 4096}]}
        elif path.endswith("/version"):
            answer = {"version": "canvas"}
        elif path.endswith("/tokenize"):
            prompt = body["prompt"]
            answer = {"tokens": [self.SPECIAL[prompt]] if prompt in self.SPECIAL else [3 + ord(c) for c in prompt]}
        elif path.endswith("/detokenize"):
            answer = {"prompt": text(body["tokens"])}
        else:
            xargs = body.get("vllm_xargs") or {}
            seed = xargs.get("diffusion_seed_canvas") or [0] * xargs.get("diffusion_canvas_length", 8)
            if max(seed) >= self.VOCAB:
                return self._send(handler, 400, json.dumps(
                    {"error": {"message": f"diffusion_seed_canvas ids must be in [0, {self.VOCAB})"}}).encode())
            pinned = set(xargs.get("diffusion_pinned") or [])
            canvas = [t if i in pinned else 3 + ord("x") for i, t in enumerate(seed)]
            choices = [{"index": i, "text": text(canvas), "token_ids": canvas, "finish_reason": "stop",
                        "logprobs": {"token_logprobs": [0.0] * len(canvas), "tokens": [text([t]) for t in canvas]}}
                       for i in range(body.get("n", 1))]
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(b"data: " + json.dumps({"choices": choices}).encode() + b"\n\ndata: [DONE]\n\n")
            handler.close_connection = True
            return
        self._send(handler, 200, json.dumps(answer).encode())

    def _slow_stream(self, handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        event = {"choices": [{"index": 0, "text": "draft", "token_ids": [], "finish_reason": None}]}
        try:
            handler.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            handler.wfile.flush()
            while not self.release.is_set():
                # A closed connection shows as end of input on the request's socket.
                handler.connection.settimeout(0.05)
                try:
                    if handler.connection.recv(1) == b"":
                        self.disconnected.set()
                        return
                except TimeoutError:
                    continue
        except OSError:
            self.disconnected.set()
        finally:
            handler.close_connection = True
