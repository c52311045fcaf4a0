"""Model faults: a model that cannot load, running out of memory mid-request, a failed hot reload.

One server process (test faults on) goes through them in order: it starts with a model directory
that does not exist, is pointed at the tiny model, hits an injected out-of-memory error, and is
then asked to reload a model that is not there. It must keep answering throughout.
"""

from __future__ import annotations

import time

import pytest

from raw_client import RawServer, inline_params, reliability_env, tiny_model_dir

TINY = str(tiny_model_dir())
POSITION = {"line": 1, "character": 4}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    srv = RawServer(reliability_env(faults=True))
    srv.root = root
    # Next-edit runs after each edit in the background; it would race the injected fault for the
    # next model call, which these tests aim at the fill they ask for.
    srv.initialize({"model": str(root / "no-such-model"), "maxSteps": 2, "canvasLength": 8,
                    "nextEdit": {"enabled": False}}, root=root)
    yield srv
    assert srv.alive(), srv.stderr()
    srv.close()


def configure(server, settings: dict) -> None:
    server.notify("workspace/didChangeConfiguration", {"settings": {"dgLsp": settings}})


def wait_status(server, predicate, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = server.command("dg.status")
        if predicate(status):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.05)


def show_messages(server, kind: int | None = None) -> list[str]:
    return [n["params"]["message"] for n in server.notifications
            if n.get("method") == "window/showMessage" and (kind is None or n["params"]["type"] == kind)]


def ask_inline(server, uri: str) -> dict:
    return server.result("textDocument/inlineCompletion", inline_params(uri, POSITION["line"], POSITION["character"]))


def test_a_model_that_cannot_load_leaves_a_working_server_that_explains(server):
    status = wait_status(server, lambda s: s["state"] != "loading")
    assert status["state"] == "error"
    assert "no-such-model" in status["message"] and "does not exist" in status["message"]
    assert server.wait_for(lambda m: m.get("method") == "window/showMessage", 10)
    time.sleep(0.3)
    errors = show_messages(server, kind=1)
    assert len(errors) == 1, errors
    assert "could not be loaded" in errors[0] and "pass a directory with config.json" in errors[0]  # why, and the fix
    uri = (server.root / "a.py").as_uri()
    server.open(uri, "def f(x):\n    \n")
    assert ask_inline(server, uri) == {"items": []}
    actions = server.result("textDocument/codeAction", {"textDocument": {"uri": uri},
                                                        "range": {"start": POSITION, "end": POSITION},
                                                        "context": {"diagnostics": []}})
    assert not actions
    completion = server.result("textDocument/completion", {"textDocument": {"uri": uri}, "position": POSITION})
    assert completion["items"] == []


def test_the_server_recovers_when_the_settings_name_a_good_model(server):
    configure(server, {"model": TINY})
    status = wait_status(server, lambda s: s["state"] == "ready")
    assert status["model"] == TINY
    assert status["nextEdit"]["enabled"] is False  # nothing in the background takes the injected faults


def oom_then_next(server, uri: str, version: int) -> int:
    """Fail one fill with an injected OOM after a 256 MiB allocation, then run the next one."""
    assert server.command("dg.test.oomNextFill", {"megabytes": 256}) == {"armed": True}
    passes = server.forward_passes()
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                             "contentChanges": [{"text": f"def g{version}(y):\n    \n"}]})
    assert ask_inline(server, uri) == {"items": []}
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version + 1},
                                             "contentChanges": [{"text": f"def h{version}(z):\n    \n"}]})
    ask_inline(server, uri)
    return passes


def warm_up(server, uri: str) -> None:
    server.open(uri, "def f(x):\n    \n")
    for version in range(2, 5):  # the first fills allocate caches that stay
        ask_inline(server, uri)
        server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": [{"text": f"def f{version}(x):\n    \n"}]})


def test_out_of_memory_fails_only_that_request(server):
    uri = (server.root / "oom.py").as_uri()
    warm_up(server, uri)
    rss_before = server.rss_kib()
    passes = oom_then_next(server, uri, 10)
    warned = server.wait_for(lambda m: m.get("method") == "window/showMessage" and "out of memory" in m["params"]["message"], 10)
    assert warned and "model stays loaded" in warned["params"]["message"]
    status = server.command("dg.status")
    assert status["state"] == "ready" and status["model"] == TINY  # still loaded
    assert server.forward_passes() > passes  # and the next request ran it
    server.command("dg.test.gc", {"collect": True})
    grown = server.rss_kib() - rss_before
    assert grown < 64 * 1024, f"RSS is {grown} KiB above its level after a 256 MiB allocation failed"


def test_out_of_memory_returns_its_memory_without_waiting_for_the_cyclic_gc(server):
    uri = (server.root / "oom-refcount.py").as_uri()
    warm_up(server, uri)
    server.command("dg.test.gc", {"collect": True, "enabled": False})
    try:
        rss_before = server.rss_kib()
        oom_then_next(server, uri, 20)
        grown = server.rss_kib() - rss_before
    finally:
        server.command("dg.test.gc", {"collect": True, "enabled": True})
    assert grown < 64 * 1024, f"RSS is {grown} KiB above its level until the cyclic GC runs"


def test_a_failed_hot_reload_keeps_the_old_model_serving(server):
    configure(server, {"model": str(server.root / "also-missing")})
    status = wait_status(server, lambda s: s["state"] != "loading" and "also-missing" in s["message"])
    assert status["state"] == "ready" and status["model"] == TINY
    assert "still serving" in status["message"]
    uri = (server.root / "after-reload.py").as_uri()
    server.open(uri, "def k(w):\n    \n")
    passes = server.forward_passes()
    assert "items" in ask_inline(server, uri)
    assert server.forward_passes() > passes
