"""The protocol under bad input: cancellation, unknown methods, broken JSON and framing, size cap, faults.

One real server process (tiny model, test faults on) serves the whole module over raw stdio, so
every test also checks that what came before it did not stop the server. The framing parser is
also tested in-process, byte by byte.
"""

from __future__ import annotations

import io
import json
import time

import pytest

from dg_lsp.framing import MAX_MESSAGE_BYTES, FrameReader, Oversized, Unparsable, parse_body, salvage_id
from raw_client import RawServer, frame, inline_params, reliability_env, tiny_model_dir

LONG = {"maxSteps": 400, "canvasLength": 256}
SHORT = {"maxSteps": 2, "canvasLength": 8}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    srv = RawServer(reliability_env(faults=True, DG_LSP_LOG="INFO"))
    srv.root = root
    srv.initialize({"model": str(tiny_model_dir()), **SHORT}, root=root)
    assert srv.wait_ready()["state"] == "ready", srv.stderr()
    yield srv
    assert srv.alive(), srv.stderr()
    srv.close()


def configure(server, settings: dict) -> None:
    server.notify("workspace/didChangeConfiguration", {"settings": {"dgLsp": settings}})
    server.command("dg.status")  # processed in order: the settings apply to every later request


def open_hole(server, name: str) -> str:
    uri = (server.root / name).as_uri()
    server.open(uri, "def slow(a, b):\n    \n")
    return uri


def wait_running(server, since: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while server.forward_passes() <= since + 1:
        assert time.monotonic() < deadline, "the long request never started denoising"
        time.sleep(0.02)


def wait_settled(server, quiet: float = 0.5, timeout: float = 20.0) -> int:
    """forwardPasses once it has stopped growing for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    last = server.forward_passes()
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = server.forward_passes()
        if now == last:
            return now
        last = now
    raise AssertionError("the worker never went idle")


def error_code(reply: dict) -> int | None:
    return reply.get("error", {}).get("code")


def assert_serving(server) -> None:
    assert server.command("dg.status", timeout=10)["state"] == "ready"


# --- Cancellation --------------------------------------------------------------------------------


def test_cancel_a_queued_request_never_runs_it(server):
    configure(server, LONG)
    try:
        a, b = open_hole(server, "busy.py"), open_hole(server, "queued.py")
        start = server.forward_passes()
        running = server.request("textDocument/inlineCompletion", inline_params(a, 1, 4))
        wait_running(server, start)
        queued = server.request("textDocument/inlineCompletion", inline_params(b, 1, 4))
        server.command("dg.status")  # the queued request has reached the scheduler
        server.cancel(queued)
        assert error_code(server.wait_reply(queued, 5)) == -32800
        assert running not in server.replies, "the running request should still be running"
        server.cancel(running)
        assert error_code(server.wait_reply(running, 5)) == -32800
        settled = wait_settled(server)
        # Both were long requests: had the queued one run at all, it would have added passes
        # after the running one stopped; the count stopped within one step of the cancel instead.
        assert settled - start < 400
        time.sleep(0.5)
        assert server.forward_passes() == settled
    finally:
        configure(server, SHORT)


def test_cancel_a_running_request_stops_the_worker_within_one_step(server):
    configure(server, LONG)
    try:
        uri = open_hole(server, "running.py")
        start = server.forward_passes()
        msg_id = server.request("textDocument/inlineCompletion", inline_params(uri, 1, 4))
        wait_running(server, start)
        sent = time.perf_counter()
        server.cancel(msg_id)
        reply = server.wait_reply(msg_id, 5)
        took = server.reply_times[msg_id] - sent
        assert "error" in reply and error_code(reply) == -32800
        at_reply = server.forward_passes()
        time.sleep(0.5)
        assert server.forward_passes() - at_reply <= 1, "the worker kept denoising after the cancel"
        assert took < 2.0  # generous; the benchmark measures the real figure
    finally:
        configure(server, SHORT)


def test_cancel_of_a_command_reaches_its_model_job(server):
    """pygls runs commands as an inner handler; the cancel must reach it (protocol._run_generator)."""
    configure(server, LONG)
    try:
        uri = open_hole(server, "command.py")
        start = server.forward_passes()
        rng = {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 4}}
        msg_id = server.request("workspace/executeCommand",
                                {"command": "dg.infill", "arguments": [{"uri": uri, "range": rng, "mode": "fim"}]})
        wait_running(server, start)
        server.cancel(msg_id)
        assert error_code(server.wait_reply(msg_id, 5)) == -32800
        at_reply = server.forward_passes()
        time.sleep(0.5)
        assert server.forward_passes() - at_reply <= 1
    finally:
        configure(server, SHORT)


def test_cancel_of_unknown_or_finished_ids_is_ignored(server):
    done = server.request("workspace/executeCommand", {"command": "dg.status", "arguments": []})
    server.wait_reply(done)
    for params in ({"id": done}, {"id": 987654}, {"id": "never-sent"}, {"id": [1]}, {}):
        server.notify("$/cancelRequest", params)
    assert_serving(server)
    assert not server.unmatched


# --- Methods -------------------------------------------------------------------------------------


def test_unknown_request_gets_method_not_found(server):
    for method in ("dg/noSuchThing", "$/noSuchRequest", "textDocument/noSuch"):
        assert error_code(server.call(method, {})) == -32601
    assert error_code(server.call("dg/withoutParams")) == -32601


def test_unknown_notifications_are_ignored_and_dollar_ones_silently(server):
    server.notify("dg/unknownNotification", {"x": 1})
    server.notify("$/unknownDollarNotification", {"x": 1})
    server.notify("$/setTrace", {"value": "off"})
    assert_serving(server)
    assert not server.unmatched
    log = server.stderr()
    assert "dg/unknownNotification" in log
    assert "unknownDollarNotification" not in log


# --- Malformed input -----------------------------------------------------------------------------


@pytest.mark.parametrize("body, code, salvaged", [
    (b'{"jsonrpc": "2.0", "id": 7001, "method": "textDocument/completion", "params": {', -32700, 7001),
    (b'not json at all', -32700, None),
    (b'{"jsonrpc": "2.0", "id": 7002, "method": "x", "params": "\xff\xfe"}', -32700, 7002),
    (b"[" * 100000 + b"]" * 100000, -32700, None),
    (b'[{"jsonrpc": "2.0", "id": 7003, "method": "shutdown"}]', -32600, None),
    (b'"a string"', -32600, None),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "shutdown"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "shutdown"}', -32600, None),
    (b'{"jsonrpc": "1.0", "id": 7004, "method": "shutdown"}', -32600, 7004),
    (b'{"jsonrpc": "2.0", "id": 7005, "method": 42}', -32600, 7005),
    (b'{"jsonrpc": "2.0", "id": 7006, "method": "textDocument/completion", "params": 3}', -32602, 7006),
    (b'{"jsonrpc": "2.0", "id": 7007, "method": "textDocument/didOpen", "params": {}}', -32600, 7007),
    (b'', -32700, None),
])
def test_malformed_messages_get_an_error_reply(server, body, code, salvaged):
    before = len(server.null_replies)
    if salvaged is not None:
        server.expect(salvaged)
    server.send_bytes(frame(body))
    if salvaged is not None:
        assert error_code(server.wait_reply(salvaged, 10)) == code
    else:
        assert_serving(server)
        nulls = server.null_replies[before:]
        assert len(nulls) == 1 and error_code(nulls[0]) == code, nulls
    assert_serving(server)


def test_invalid_params_get_invalid_params(server):
    uri = open_hole(server, "params.py")
    bad = [
        ("textDocument/inlineCompletion", {**inline_params(uri, 0, 0), "position": "line 1"}),
        ("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": "zero", "character": 0}}),
        ("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": -1, "character": 0}}),
        ("textDocument/codeAction", {"textDocument": {"uri": uri}}),
        ("textDocument/inlineCompletion", []),
        ("workspace/executeCommand", {"command": 5}),
        ("workspace/executeCommand", {"command": "dg.noSuchCommand", "arguments": []}),
    ]
    for method, params in bad:
        reply = server.call(method, params)
        assert error_code(reply) == -32602, (method, params, reply)
    # A notification with invalid params has no one to answer: it is dropped.
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": "two"}, "contentChanges": [{}]})
    assert_serving(server)


def test_sync_notifications_for_unknown_documents_or_odd_uris_raise_nothing(server):
    """pygls' own document copy used to raise here, skipping our handler and showing an error."""
    ghost = (server.root / "never-opened.py").as_uri()
    server.notify("textDocument/didChange", {"textDocument": {"uri": ghost, "version": 2},
                                             "contentChanges": [{"text": "x"}]})
    server.notify("textDocument/didClose", {"textDocument": {"uri": ghost}})
    odd = "file://[broken/odd.py"
    server.open(odd, "y = 2\n")
    assert server.command("dg.documentHash", {"uri": odd})["version"] == 1  # our handler ran
    server.notify("textDocument/didChange", {"textDocument": {"uri": odd, "version": 2},
                                             "contentChanges": [{"text": "y = 3\n"}]})
    assert server.command("dg.documentHash", {"uri": odd})["version"] == 2
    server.notify("textDocument/didClose", {"textDocument": {"uri": odd}})
    assert server.command("dg.documentHash", {"uri": odd}) is None
    assert not [m for m in server.messages("window/showMessage") if m.startswith("Error in server")]


def test_broken_framing_is_skipped_and_the_next_message_is_served(server):
    status = json.dumps({"jsonrpc": "2.0", "id": 8100, "method": "workspace/executeCommand",
                         "params": {"command": "dg.status", "arguments": []}}).encode()
    broken = json.dumps({"jsonrpc": "2.0", "id": 8101, "method": "workspace/executeCommand",
                         "params": {"command": "dg.status", "arguments": []}}).encode()
    server.expect(8100)
    server.expect(8101)
    server.send_bytes(b"Content-Length: abc\r\n\r\n" + broken)  # bad header, then the body glued to the next header
    server.send_bytes(b"garbage between messages\r\n\r\n\r\nmore garbage")
    server.send_bytes(b"Content-Length: -5\r\n\r\n")
    server.send_bytes(b"X-Unknown: 1\r\ncontent-length:  %d \r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n%s"
                      % (len(status), status))
    assert "result" in server.wait_reply(8100, 10)
    assert error_code(server.wait_reply(8101, 10)) == -32700  # its id was still readable
    # A too-short Content-Length: the rest of the body is garbage before the next frame.
    short = json.dumps({"jsonrpc": "2.0", "id": 8102, "method": "shutdown"}).encode()
    server.send_bytes(b"Content-Length: 10\r\n\r\n" + short)
    assert_serving(server)


def test_a_message_over_the_cap_is_discarded_unread(server):
    rss_before = server.rss_kib()
    size = MAX_MESSAGE_BYTES + 1024 * 1024
    head = b'{"jsonrpc": "2.0", "id": 8200, "method": "textDocument/didOpen", "params": {"text": "'
    tail = b'"}}'
    server.expect(8200)
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % size + head)
    chunk = b"a" * (1024 * 1024)
    left = size - len(head) - len(tail)
    while left > 0:
        server.send_bytes(chunk[: min(left, len(chunk))])
        left -= len(chunk)
    server.send_bytes(tail)
    reply = server.wait_reply(8200, 30)
    assert error_code(reply) == -32600 and "limit" in reply["error"]["message"]
    # An oversized notification (no id) is dropped with a log message.
    note = b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"x": "' + b"b" * size + b'"}}'
    server.send_bytes(frame(note))
    assert server.wait_for(lambda m: m.get("method") == "window/logMessage" and "limit" in m["params"]["message"], 30)
    assert_serving(server)
    grown = server.rss_kib() - rss_before
    assert grown < 8 * 1024, f"RSS grew by {grown} KiB while discarding {size} bytes"


# --- Faults --------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["loop", "worker"])
def test_a_raising_handler_answers_internal_error(server, where):
    reply = server.call("workspace/executeCommand", {"command": "dg.test.raise", "arguments": [{"where": where}]})
    assert error_code(reply) == -32603
    uri = open_hole(server, f"after-{where}.py")
    start = server.forward_passes()
    result = server.result("textDocument/inlineCompletion", inline_params(uri, 1, 4))
    assert "items" in result and server.forward_passes() > start  # the worker still runs the model


# --- In-process ---------------------------------------------------------------------------------


class Capture:
    def __init__(self):
        self.frames = []

    def write(self, data: bytes) -> None:
        self.frames.append(data)

    def close(self) -> None:
        pass


async def test_no_future_is_kept_per_notification_or_command(tmp_path):
    """pygls kept a future (with its params) per generator-handled notification and per command."""
    import asyncio

    from dg_lsp.server import build_server

    server = build_server()
    protocol = server.protocol
    protocol.set_writer(Capture())
    protocol.exit_hook = lambda code: None
    protocol.handle_json({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}})
    uri = (tmp_path / "a.py").as_uri()
    protocol.handle_json({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}}})
    for version in range(2, 40):
        protocol.handle_json({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": f"x = {version}\n"}]}})
        protocol.handle_json({"jsonrpc": "2.0", "id": 100 + version, "method": "workspace/executeCommand",
                              "params": {"command": "dg.status", "arguments": []}})
    await asyncio.sleep(0.1)
    assert len(protocol._request_futures) == 0, list(protocol._request_futures)[:5]
    server.scheduler.shutdown()


# --- The framing parser in-process ---------------------------------------------------------------


def frames(data: bytes, max_message: int = MAX_MESSAGE_BYTES, chunk: int = 7) -> list:
    stream = io.BytesIO(data)
    reader = FrameReader(lambda n: stream.read(min(n, chunk)), max_message)
    out = []
    while (item := reader.next()) is not None:
        out.append(item)
    return out


def test_frame_reader_resyncs_after_garbage_and_bad_headers():
    a, b = b'{"a": 1}', b'{"b": 2}'
    data = (b"junk\r\n" + frame(a) + b"\r\n\r\n" + b"Content-Length: x\r\n\r\n{}" + frame(b)
            + b"CONTENT-LENGTH:%d\n\n%s" % (len(a), a) + b"x" * 20000 + frame(b))
    assert frames(data) == [a, b, a, b]


def test_frame_reader_discards_oversized_bodies_in_chunks():
    big = b'{"jsonrpc": "2.0", "id": 3, "method": "x", "params": "' + b"z" * 5000 + b'"}'
    reads = []
    stream = io.BytesIO(frame(big) + frame(b"{}"))

    def read(n):
        reads.append(n)
        return stream.read(n)

    reader = FrameReader(read, max_message=1000)
    assert reader.next() == Oversized(len(big), 3)
    assert reader.next() == b"{}"
    assert reader.next() is None


def test_frame_reader_ends_cleanly_on_truncated_input():
    assert frames(b"Content-Length: 50\r\n\r\n{\"a\"") == []
    assert frames(b"Content-Length: 5\r\n") == []
    assert frames(b"") == []


def test_salvage_id_only_trusts_a_top_level_request_id():
    assert salvage_id('{"jsonrpc": "2.0", "id": 12, "method": "x", "params": {') == 12
    assert salvage_id('{"method": "x", "id": "abc"') == "abc"
    assert salvage_id('{"method": "$/cancelRequest", "params": {"id": 12}') is None  # nested id
    assert salvage_id('{"id": 12, "result": {') is None  # a response, not a request
    assert salvage_id('{"id": 1') is None  # the number may be cut short
    assert salvage_id('{"method": "x", "params": {"s": "\\"id\\": 4"}, "id": 5,') == 5
    assert salvage_id('{"method": null, "id": 5, ') is None  # a method is a string
    assert salvage_id('{"id": ""z[a}, "method": "m"') is None  # bytes were inserted into the id
    # Only the first top-level value counts: the tail of a message cut short by its length header
    # reads as closing brackets and then the keys of some inner object.
    assert salvage_id('"x": 1}}, {"id": 0, "method": "m"}') is None


def test_the_tail_of_a_message_cut_short_gets_no_reply():
    """A Content-Length shorter than its body leaves the rest as garbage; its inner ids are nobody's."""
    body = b'{"jsonrpc": "2.0", "id": 7, "method": "m", "params": {"a": {"id": 0, "method": "n"}}}'
    cut = body.index(b'{"id": 0')
    data = b"Content-Length: %d\r\n\r\n%s\r\n" % (cut, body)
    items = frames(data)
    assert isinstance(items[0], bytes) and isinstance(parse_body(items[0]), Unparsable)
    assert parse_body(items[0]).id == 7  # the request's own id, salvaged from its head
    assert len(items) == 1  # no reply for the tail's id 0
    # A whole request whose header was broken still gets its error reply.
    whole = frames(b"Content-Lenth: 12\r\n\r\n" + body + b"\r\n")
    assert [getattr(i, "id", None) for i in whole] == [7]


def test_an_id_broken_by_bad_bytes_is_not_salvaged():
    assert parse_body(b'{"id": "s-1\xff", "method": "m", ').id is None
    assert parse_body(b'{"id": "s-1", "method": "m", \xff').id == "s-1"


def test_parse_body_reports_unparsable_text():
    assert parse_body(b'{"a": [1]}') == {"a": [1]}
    assert isinstance(parse_body(b"\xff"), Unparsable)
    assert isinstance(parse_body(b"[" * 50000), Unparsable)
