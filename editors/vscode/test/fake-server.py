#!/usr/bin/env python3
"""A scripted stand-in for `dg-lsp serve`, for the extension's smoke test (test/smoke.js).

It speaks just enough LSP over stdio to let the bundled extension start, and logs every message it
receives to $FAKE_LOG (one JSON object per line) so the test can check what the extension sent.
"""
import json
import os
import sys
import time

LOG = os.environ["FAKE_LOG"]
stdin, stdout = sys.stdin.buffer, sys.stdout.buffer


def log(message):
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(message) + "\n")


def send(message):
    message["jsonrpc"] = "2.0"
    body = json.dumps(message).encode()
    stdout.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    stdout.flush()


def receive():
    length = None
    while True:
        line = stdin.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return json.loads(stdin.read(length))


def execute(request):
    command = request["params"]["command"]
    args = request["params"].get("arguments") or [{}]
    arg = args[0] if args else {}
    if arg.get("instruction") == "crash":
        os._exit(1)
    if command == "dg.status":
        return {"state": "ready", "model": "embedded", "device": "cpu", "dtype": "float32",
                "quantization": "none", "parameters": 123456789, "memoryBytes": 512 * 1024 * 1024,
                "lastLatencyMs": {"inline": 42, "infill": 310}}
    if command == "dg.learnRepository":
        return {"started": True, "adapter": "/cache/adapter", "message": f"learning for {arg.get('minutes')} minutes"}
    if command == "dg.stopLearning":
        return {"stopped": False, "message": "nothing is being learned"}
    if arg.get("mode") == "holes":
        return {"applied": False, "message": "no holes found"}
    if arg.get("mode") == "body":
        # Slow on purpose: the test cancels this one and expects $/cancelRequest.
        time.sleep(0.5)
        return {"applied": False, "message": "too slow"}
    position = arg.get("position") or arg["range"]["start"]
    send({"method": "dg/draft", "params": {"uri": arg["uri"], "position": position, "text": "x = 1\ny", "final": False}})
    time.sleep(0.05)
    send({"id": "edit-1", "method": "workspace/applyEdit", "params": {"edit": {"changes": {
        arg["uri"]: [{"range": {"start": position, "end": position}, "newText": "x = 1\n"}]}}}})
    send({"method": "dg/draft", "params": {"uri": arg["uri"], "position": position, "text": "", "final": True}})
    return {"applied": True, "latencyMs": 17}


VERSIONS = {}


def next_edit(message):
    """A suggestion for the text the fake last saw; slow when the text asks for it."""
    uri = message["params"]["textDocument"]["uri"]
    version, text = VERSIONS.get(uri, (0, ""))
    if "slow" in text:
        time.sleep(0.6)
    if "pas\n" not in text:
        return None
    edit = {"range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 7}},
            "newText": "pass", "confidence": 0.9}
    return {"edits": [edit], "confidence": 0.9, "version": version}


def main():
    sys.stderr.write("INFO fake dg-lsp starting, args=%r\n" % (sys.argv[1:],))
    sys.stderr.flush()
    while True:
        message = receive()
        if message is None:
            return
        log(message)
        method = message.get("method")
        if method == "initialize":
            send({"id": message["id"], "result": {"capabilities": {
                "textDocumentSync": 1,
                "inlineCompletionProvider": True,
                "executeCommandProvider": {"commands": ["dg.infill", "dg.rewriteParagraph", "dg.status"]},
            }, "serverInfo": {"name": "fake-dg-lsp"}}})
        elif method == "initialized":
            send({"method": "dg/status", "params": {"state": "loading", "message": "loading weights"}})
            send({"method": "dg/status", "params": {"state": "ready", "lastLatencyMs": 42}})
        elif method in ("textDocument/didOpen", "textDocument/didChange"):
            doc = message["params"]["textDocument"]
            text = doc["text"] if "text" in doc else message["params"]["contentChanges"][-1]["text"]
            VERSIONS[doc["uri"]] = (doc["version"], text)
        elif method == "dg/nextEdit":
            send({"id": message["id"], "result": next_edit(message)})
        elif method == "workspace/executeCommand":
            send({"id": message["id"], "result": execute(message)})
        elif method == "shutdown":
            send({"id": message["id"], "result": None})
        elif method == "exit":
            return
        elif method is not None and "id" in message:
            send({"id": message["id"], "result": None})


if __name__ == "__main__":
    main()
