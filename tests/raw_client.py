"""A raw stdio LSP client for the reliability, fuzz and security tests and the reliability benchmark.

pytest-lsp cannot send broken framing, requests before `initialize`, or watch the exit code, so
these tests talk to the real server process through this: hand-written `Content-Length` frames
out, a reader thread that collects every reply and notification, answers the server's own
requests (`workspace/applyEdit` is applied, everything else gets `null`), and waits with timeouts.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from lsp_helpers import server_command, server_env, tiny_model_dir  # noqa: E402

__all__ = ["RawServer", "frame", "tiny_model_dir", "reliability_env", "inline_params", "rss_kib"]


def frame(body: bytes | str | dict) -> bytes:
    if isinstance(body, dict):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def reliability_env(faults: bool = False, **extra: str) -> dict:
    env = server_env()
    # One torch thread: on a shared, busy CPU, torch's default thread pool spins and is many times
    # slower for the tiny model than a single thread.
    env["OMP_NUM_THREADS"] = "1"
    env.pop("DG_LSP_TEST_FAULTS", None)
    if faults:
        env["DG_LSP_TEST_FAULTS"] = "1"
    env.update(extra)
    return env


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def inline_params(uri: str, line: int, character: int) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 1}}


class RawServer:
    """The server as a child process, spoken to in raw JSON-RPC frames."""

    def __init__(self, env: dict | None = None, args: tuple[str, ...] = (), cwd: str | None = None):
        self.stderr_path = tempfile.mktemp(prefix="dg-lsp-stderr-", suffix=".log")
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(server_command(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=env or reliability_env(), cwd=cwd, bufsize=0)
        self.pid = self.proc.pid
        self.replies: dict = {}
        self.reply_times: dict = {}
        self.unmatched: list[dict] = []  # replies with an id we never sent, or a second reply
        self.null_replies: list[dict] = []  # errors for messages whose id could not be read
        self.notifications: list[dict] = []
        self.server_requests: list[dict] = []
        self.sent_ids: set = set()
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self.closed = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    # --- Reading ---------------------------------------------------------------------------------

    def _read(self) -> None:
        out = self.proc.stdout
        try:
            while True:
                length = None
                while True:
                    line = out.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = b""
                while len(body) < length:
                    chunk = out.read(length - len(body))
                    if not chunk:
                        return
                    body += chunk
                self._dispatch(json.loads(body))
        finally:
            with self._cond:
                self.closed = True
                self._cond.notify_all()

    def _dispatch(self, message: dict) -> None:
        if "method" in message and "id" in message:
            self.server_requests.append(message)
            result = {"applied": True} if message["method"] == "workspace/applyEdit" else None
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            return
        with self._cond:
            if "method" in message:
                self.notifications.append(message)
            else:
                key = message.get("id")
                if key is None:
                    self.null_replies.append(message)
                elif key in self.replies or key not in self.sent_ids:
                    self.unmatched.append(message)
                else:
                    self.replies[key] = message
                    self.reply_times[key] = time.perf_counter()
            self._cond.notify_all()

    # --- Writing ---------------------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        with self._write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, message: dict) -> None:
        self.send_bytes(frame(message))

    def next_id(self) -> int:
        return next(self._ids)

    def request(self, method: str, params=None, msg_id=None) -> int | str:
        msg_id = self.next_id() if msg_id is None else msg_id
        self.expect(msg_id)
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return msg_id

    def expect(self, msg_id) -> None:
        with self._cond:
            self.sent_ids.add(msg_id)

    def notify(self, method: str, params=None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def cancel(self, msg_id) -> None:
        self.notify("$/cancelRequest", {"id": msg_id})

    # --- Waiting ---------------------------------------------------------------------------------

    def wait_reply(self, msg_id, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while msg_id not in self.replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise TimeoutError(f"no reply to {msg_id!r} within {timeout} s (server {'exited' if self.closed else 'alive'})")
                self._cond.wait(left)
            return self.replies[msg_id]

    def call(self, method: str, params=None, timeout: float = 30.0) -> dict:
        return self.wait_reply(self.request(method, params), timeout)

    def result(self, method: str, params=None, timeout: float = 30.0):
        reply = self.call(method, params, timeout)
        assert "error" not in reply, reply
        return reply["result"]

    def command(self, name: str, *args, timeout: float = 30.0):
        return self.result("workspace/executeCommand", {"command": name, "arguments": list(args)}, timeout)

    def wait_for(self, predicate, timeout: float = 10.0):
        """The first notification that satisfies `predicate`, waiting for it if needed."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for message in self.notifications:
                    if predicate(message):
                        return message
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def messages(self, method: str) -> list[str]:
        with self._cond:
            return [n["params"]["message"] for n in self.notifications if n.get("method") == method]

    # --- Session ---------------------------------------------------------------------------------

    def initialize(self, options: dict | None = None, root: Path | None = None, process_id: int | None = None,
                   encodings: list[str] | None = None, initialized: bool = True) -> dict:
        capabilities: dict = {
            "textDocument": {"inlineCompletion": {}, "codeAction": {"resolveSupport": {"properties": ["edit"]}}},
            "workspace": {"applyEdit": True},
        }
        if encodings:
            capabilities["general"] = {"positionEncodings": encodings}
        params = {"processId": process_id, "capabilities": capabilities, "initializationOptions": options or {},
                  "rootUri": root.as_uri() if root else None}
        result = self.result("initialize", params)
        if initialized:
            self.notify("initialized", {})
        return result

    def wait_ready(self, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            status = self.command("dg.status")
            if status["state"] in ("ready", "error") or time.monotonic() > deadline:
                return status
            time.sleep(0.05)

    def open(self, uri: str, text: str, language: str = "python", version: int = 1) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": language,
                                                              "version": version, "text": text}})

    def forward_passes(self) -> int:
        return self.command("dg.status")["forwardPasses"]

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        try:
            return Path(self.stderr_path).read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._stderr.close()
        try:
            os.unlink(self.stderr_path)
        except OSError:
            pass
