"""The server's life: before `initialize`, after `shutdown`, `exit` codes, stdin closing, the editor dying.

Each test ends its own server process; the processes are all started together when the module
begins, so that their (slow) imports overlap.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from raw_client import RawServer, inline_params, reliability_env, tiny_model_dir

NAMES = ("exit0", "exit1", "stdin", "parent")


@pytest.fixture(scope="module")
def servers():
    started = {name: RawServer(reliability_env()) for name in NAMES}
    yield started
    for server in started.values():
        server.close()


def error_code(reply: dict) -> int | None:
    return reply.get("error", {}).get("code")


def test_before_initialize_after_shutdown_and_exit_0(servers, tmp_path):
    server = servers["exit0"]
    uri = (tmp_path / "a.py").as_uri()
    assert error_code(server.call("textDocument/completion", {"textDocument": {"uri": uri},
                                                              "position": {"line": 0, "character": 0}})) == -32002
    assert error_code(server.call("workspace/executeCommand", {"command": "dg.status", "arguments": []})) == -32002
    assert error_code(server.call("shutdown")) == -32002
    server.open(uri, "x = 1\n")  # a notification before initialize is dropped, not answered
    server.initialize({}, root=tmp_path, initialized=False)  # no `initialized`: no model load
    assert error_code(server.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})) == -32600
    assert server.command("dg.status")["documents"] == 0  # the early didOpen did not count
    reply = server.call("shutdown")
    assert "error" not in reply and reply["result"] is None
    for method, params in (("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}),
                           ("workspace/executeCommand", {"command": "dg.status", "arguments": []}),
                           ("shutdown", None), ("dg/unknown", {})):
        assert error_code(server.call(method, params, timeout=10)) == -32600, method
    server.notify("exit")
    assert server.wait_exit(5) == 0
    assert not server.null_replies and not server.unmatched


def test_exit_without_shutdown_is_1_and_a_missing_process_id_is_not_watched(servers, tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    server = servers["exit1"]
    # A processId that does not exist here (another pid namespace) cannot die: it is not watched.
    server.initialize({}, root=tmp_path, process_id=gone.pid, initialized=False)
    time.sleep(0.6)
    assert server.command("dg.status") and server.alive()
    server.notify("exit")
    assert server.wait_exit(5) == 1


def test_stdin_closing_ends_the_server_while_the_model_runs(servers, tmp_path):
    server = servers["stdin"]
    server.initialize({"model": str(tiny_model_dir()), "maxSteps": 400, "canvasLength": 256}, root=tmp_path)
    assert server.wait_ready()["state"] == "ready"
    uri = (tmp_path / "a.py").as_uri()
    server.open(uri, "def f(x):\n    \n")
    start = server.forward_passes()
    server.request("textDocument/inlineCompletion", inline_params(uri, 1, 4))
    while server.forward_passes() <= start + 1:
        time.sleep(0.02)
    closed = time.perf_counter()
    server.proc.stdin.close()
    code = server.wait_exit(10)
    took = time.perf_counter() - closed
    assert code == 1  # no shutdown came first
    assert took < 2.0, f"exited {took:.2f} s after stdin closed"


def test_the_editor_dying_ends_the_server(servers, tmp_path):
    editor = subprocess.Popen(["sleep", "600"])
    server = servers["parent"]
    try:
        server.initialize({}, root=tmp_path, process_id=editor.pid, initialized=False)
        server.command("dg.status")
        assert server.alive()
        editor.kill()  # not reaped yet: a zombie must count as dead
        killed = time.perf_counter()
        code = server.wait_exit(10)
        took = time.perf_counter() - killed
        assert code == 0
        assert took < 2.0, f"exited {took:.2f} s after the editor died"
    finally:
        editor.wait()
