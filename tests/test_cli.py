"""The `dg-lsp` command line, run as a real process against the tiny model."""

from __future__ import annotations

import json
import subprocess
import sys

from lsp_helpers import server_env, tiny_model_dir

TINY = str(tiny_model_dir())


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dg_lsp", *args], capture_output=True, text=True,
                          timeout=timeout, env=server_env())


def test_infill_jsonl_round_trip_keeps_order_and_reports_bad_lines(tmp_path):
    cases = [
        json.dumps({"id": "a", "prefix": "def f(x):\n    return ", "suffix": "\n"}),
        "{not json",
        json.dumps({"id": "c", "prefix": 3, "suffix": ""}),
        "",
        json.dumps({"id": "e", "prefix": "x = ", "suffix": "\nprint(x)\n", "language": "python"}),
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(cases) + "\n")
    done = run("infill", "--jsonl", str(src), "--out", str(out), "--model", TINY, "--max-steps", "3")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == len(cases)
    assert [r["id"] for r in lines] == ["a", "line-2", "c", "line-4", "e"]
    for record in lines:
        assert set(record) >= {"id", "middle", "tokens_per_forward", "steps", "latency_ms"}
    good = [lines[0], lines[4]]
    assert all("error" not in r and r["steps"] >= 1 and r["tokens_per_forward"] > 0 for r in good)
    bad = [lines[1], lines[2], lines[3]]
    assert all(r["middle"] == "" and r["error"] for r in bad)
    assert "invalid JSON" in lines[1]["error"] and "must be strings" in lines[2]["error"]
    assert "failed" in done.stderr  # the summary line on stderr


def test_infill_at_a_cursor_prints_the_fill(tmp_path):
    source = tmp_path / "a.py"
    source.write_text("def f(x):\n    return \n")
    done = run("infill", str(source), "--at", "2:12", "--model", TINY, "--n", "2", "--max-steps", "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("--- candidate") == 2
    assert "steps]" in done.stderr


def test_a_cursor_outside_the_file_is_refused_before_the_model_loads(tmp_path):
    from dg_lsp.batch import cursor_offset

    text = "ab\ncd\n"
    # A column past its line's end is the line's end; the empty last line is a place too.
    assert [cursor_offset(text, at) for at in ("1:1", "1:3", "1:9", "2:2", "3:1")] == [0, 2, 2, 4, 6]
    source = tmp_path / "a.py"
    source.write_text(text)
    for at in ("4:1", "0:1", "1:0"):
        done = run("infill", str(source), "--at", at, "--model", str(tmp_path / "no-model-here"))
        assert done.returncode != 0
        assert f"--at {at} is outside the file: it has 3 line(s)" in done.stderr
        assert "Traceback" not in done.stderr  # refused before the (missing) model is looked for


def test_check_reports_the_setup():
    done = run("check", "--model", TINY, "--max-steps", "3")
    assert done.returncode == 0, done.stderr
    for label in ("torch", "transformers", "model", "device", "memory", "infill"):
        assert label in done.stdout


def test_missing_model_is_one_clear_line_and_exit_status_2(tmp_path):
    done = run("check", "--model", str(tmp_path / "missing"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "does not exist" in done.stderr


def _frame(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_message(sock) -> dict:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, rest = data.split(b"\r\n\r\n", 1)
    length = int(head.split(b":")[1])
    while len(rest) < length:
        rest += sock.recv(4096)
    return json.loads(rest[:length])


def test_serve_over_tcp_initializes_and_shuts_down():
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "dg_lsp", "serve", "--tcp", f"127.0.0.1:{port}", "--model", TINY],
                            env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                time.sleep(0.1)
        with sock:
            # The TCP transport reads through the same hardened framing as stdio: stray bytes and
            # a lower-case header before the first message are survived.
            garbage = b"\x00junk\r\n\r\n"
            sock.sendall(garbage + _frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                           "params": {"capabilities": {}}}).replace(b"Content-Length", b"content-length"))
            reply = _read_message(sock)
            while "id" not in reply:  # skip notifications
                reply = _read_message(sock)
            assert reply["id"] == 1 and "inlineCompletionProvider" in reply["result"]["capabilities"]
            sock.sendall(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
            reply = _read_message(sock)
            while reply.get("id") != 2:
                reply = _read_message(sock)
            assert reply["result"] is None
            # An over-long message is refused by the size cap with its id, and the connection lives on.
            huge = b'{"jsonrpc": "2.0", "id": 3, "method": "dg/x", "params": {"p": "' + b"a" * (17 << 20) + b'"}}'
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(huge) + huge)
            reply = _read_message(sock)
            while reply.get("id") != 3:
                reply = _read_message(sock)
            assert reply["error"]["code"] == -32600
            sock.sendall(_frame({"jsonrpc": "2.0", "method": "exit"}))
            assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.wait(10)


def test_log_levels_per_logger(monkeypatch):
    import logging

    from dg_lsp.logs import configure_logging

    monkeypatch.setattr(logging.getLogger("dg_lsp.protocol"), "level", logging.NOTSET)
    configure_logging("WARNING,dg_lsp.protocol=DEBUG,other=LOUD")
    assert logging.getLogger("dg_lsp.protocol").getEffectiveLevel() == logging.DEBUG
    assert logging.getLogger("other").level == logging.NOTSET  # an unknown level changes nothing


def test_engine_flags_become_the_engine_config():
    from dg_lsp.cli import build_parser, engine_config

    args = build_parser().parse_args(["infill", "a.py", "--at", "1:1", "--lead-beam", "3", "--max-steps", "5"])
    config = engine_config(args)
    assert (config.lead_beam, config.max_steps) == (3, 5)
    assert engine_config(build_parser().parse_args(["infill", "a.py", "--at", "1:1"])).lead_beam == 0
