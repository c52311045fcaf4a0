"""The server's security promises, end to end: safetensors only, no network, no workspace-chosen code.

One server process runs with every socket connection and name lookup blocked and recorded (a
`sitecustomize.py` first on PYTHONPATH), in a workspace whose `.dg-lsp.toml` tries to choose the
model, device and threads. It is first given a model directory with only pickle weights (whose
unpickling would leave a marker file), then the tiny model, and then goes through a whole
session. A grep checks that `trust_remote_code` is never set anywhere in the code.
"""

from __future__ import annotations

import pickle
import re
import shutil
import time
from pathlib import Path

import pytest

from raw_client import RawServer, inline_params, reliability_env, tiny_model_dir

REPO = Path(__file__).resolve().parent.parent
TINY = str(tiny_model_dir())

SITECUSTOMIZE = '''
import os, socket

_LOG = os.environ["DG_TEST_NET_LOG"]
with open(_LOG + ".loaded", "w") as f:
    f.write("sitecustomize loaded\\n")


def _blocked(name, original):
    def blocked(*args, **kwargs):
        with open(_LOG, "a") as f:
            f.write(f"{name} {args[1:] if name.startswith('socket.') else args!r}\\n")
        raise OSError(f"network access blocked by the test: {name}")
    return blocked


for _name in ("connect", "connect_ex"):
    setattr(socket.socket, _name, _blocked("socket." + _name, getattr(socket.socket, _name)))
for _name in ("create_connection", "getaddrinfo", "gethostbyname", "gethostbyname_ex"):
    setattr(socket, _name, _blocked(_name, getattr(socket, _name)))
'''


class Payload:
    """Unpickling this creates a marker file: proof that pickle weights were (not) loaded."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("security")
    net_log = base / "net.log"
    site = base / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    pickled = base / "pickle-model"
    pickled.mkdir()
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(Path(TINY) / name, pickled / name)
    marker = base / "pickle-was-loaded"
    (pickled / "pytorch_model.bin").write_bytes(pickle.dumps(Payload(str(marker))))
    root = base / "ws"
    root.mkdir()
    (root / ".dg-lsp.toml").write_text('model = "/evil"\ndevice = "cuda"\nthreads = 64\ncandidates = 2\n')
    env = reliability_env(PYTHONPATH=str(site), DG_TEST_NET_LOG=str(net_log))
    srv = RawServer(env)
    srv.root, srv.net_log, srv.marker, srv.pickled = root, net_log, marker, pickled
    srv.initialize({"model": str(pickled), "maxSteps": 2, "canvasLength": 8}, root=root)
    yield srv
    srv.close()


def wait_state(server, state: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while (status := server.command("dg.status"))["state"] != state:
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    return status


def test_pickle_only_weights_are_refused_with_a_clear_message(server):
    status = wait_state(server, "error")
    assert "safetensors" in status["message"] and "pickle" in status["message"]
    shown = server.wait_for(lambda m: m.get("method") == "window/showMessage" and "safetensors" in m["params"]["message"], 10)
    assert shown and shown["params"]["type"] == 1
    assert not server.marker.exists(), "the pickle file was unpickled"


def test_a_workspace_file_cannot_choose_the_model_device_or_threads(server):
    warnings = [m for m in server.messages("window/showMessage") if ".dg-lsp.toml" in m]
    for key in ("model", "device", "threads"):
        assert any(f"'{key}' can only be set in your user settings" in m for m in warnings), (key, warnings)
    status = server.command("dg.status")
    assert status.get("model") != "/evil" and "/evil" not in status["message"]


def test_a_whole_session_never_touches_the_network(server):
    server.notify("workspace/didChangeConfiguration", {"settings": {"dgLsp": {"model": TINY}}})
    assert wait_state(server, "ready")["model"] == TINY
    uri = (server.root / "main.py").as_uri()
    text = "def area(w, h):\n    \n\n\ndef total(values):\n    result = 0\n    return result\n"
    server.open(uri, text)
    server.open((server.root / "notes.md").as_uri(), "# Notes\n\nA paragraph to rewrite.\n", language="markdown")
    assert "items" in server.result("textDocument/inlineCompletion", inline_params(uri, 1, 4))
    here = {"line": 1, "character": 4}
    server.result("textDocument/completion", {"textDocument": {"uri": uri}, "position": here})
    actions = server.result("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {"start": here, "end": here},
                                                        "context": {"diagnostics": []}})
    assert actions
    server.result("codeAction/resolve", actions[0])
    selection = {"start": {"line": 5, "character": 4}, "end": {"line": 5, "character": 14}}
    rewrites = server.result("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": selection,
                                                         "context": {"diagnostics": []}})
    rewrite = next(a for a in rewrites if a["kind"] == "refactor.rewrite")
    server.result("codeAction/resolve", rewrite)
    server.command("dg.rewriteParagraph", {"uri": (server.root / "notes.md").as_uri(), "position": {"line": 2, "character": 3}})
    server.command("dg.infill", {"uri": uri, "range": {"start": here, "end": here}, "mode": "fim"})
    assert server.call("shutdown")["result"] is None
    server.notify("exit")
    assert server.wait_exit(10) == 0
    assert Path(str(server.net_log) + ".loaded").exists(), "the socket blocker was not installed"
    attempts = server.net_log.read_text() if server.net_log.exists() else ""
    assert attempts == "", f"the server tried to use the network:\n{attempts}"
    assert not server.marker.exists()


def test_trust_remote_code_is_never_set():
    pattern = re.compile(r"trust_remote_code")
    allowed = re.compile(r"trust_remote_code\s*=\s*False\b")
    found = []
    for folder in ("dg_lsp", "engine"):
        for path in (REPO / folder).rglob("*"):
            if path.suffix not in (".py", ".json", ".toml", ".cfg", ".yaml", ".yml") or not path.is_file():
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
                code = line.split("#", 1)[0] if path.suffix == ".py" else line
                for match in pattern.finditer(code):
                    if not allowed.match(code, match.start()):
                        found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "trust_remote_code may only ever appear as trust_remote_code=False:\n" + "\n".join(found)
