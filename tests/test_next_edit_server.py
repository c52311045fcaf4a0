"""dg/nextEdit over the real server (tiny random model): the request, its gate, the debounced
background run that feeds the code action, and edits that arrive while a suggestion computes.

The tiny model's text is noise; these tests check what the protocol promises, and the shipped
model's suggestions are measured by `benchmarks/next_edit.py`."""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import command, open_doc, open_session, server_command, server_env, tiny_model_dir

SRC = "class Shape:\n    def area(self, w, h):\n        total = w * h\n        return total\n"


async def start(client: LanguageClient, tmp_path_factory, **options):
    status = await open_session(client, tmp_path_factory, {"model": str(tiny_model_dir()), "maxSteps": 4, **options})
    assert status["state"] == "ready"


def session(name: str, **options):
    """A fixture `name`: a fresh server started with `options`."""
    async def serve(lsp_client: LanguageClient, tmp_path_factory):
        await start(lsp_client, tmp_path_factory, **options)
        yield
        await lsp_client.shutdown_session()

    config = ClientServerConfig(server_command=server_command(), server_env=server_env())
    return pytest_lsp.fixture(config=config, name=name)(serve)


client = session("client", nextEdit={"minConfidence": 0.0, "debounceMs": 150})
gated = session("gated", nextEdit={"minConfidence": 0.999})
disabled = session("disabled", nextEdit={"enabled": False, "minConfidence": 0.0})


def rename(client, uri: str, version: int, text: str = SRC) -> str:
    """Rename the parameter `w` in the def (the user's edit); returns the new text."""
    at = types.Position(1, text.splitlines()[1].index("w,"))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(version=version, uri=uri),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(at, types.Position(at.line, at.character + 1)), text="width")]))
    return text.replace("area(self, w,", "area(self, width,")


def ask(client, uri: str, line: int = 1):
    return client.protocol.send_request_async(
        "dg/nextEdit", {"textDocument": {"uri": uri}, "position": {"line": line, "character": 0}})


async def status(client) -> dict:
    return (await command(client, "dg.status"))["nextEdit"]


def apply(text: str, edits: list) -> str:
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(p):
        return starts[p["line"]] + p["character"]

    for e in sorted(edits, key=lambda e: offset(e["range"]["start"]), reverse=True):
        a, b = offset(e["range"]["start"]), offset(e["range"]["end"])
        text = text[:a] + e["newText"] + text[b:]
    return text


def plain(value):
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


async def test_the_debounced_run_computes_once_per_pause_and_feeds_the_code_action(client):
    uri = (client.root / "shape.py").as_uri()
    open_doc(client, uri, SRC)
    text = SRC
    for version in range(2, 7):  # five keystrokes inside one pause
        text = rename(client, uri, version, text) if version == 2 else text
        if version > 2:
            at = types.Position(3, len("        return total"))
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                content_changes=[types.TextDocumentContentChangePartial(range=types.Range(at, at), text=" ")]))
            text = text.replace("return total", "return total ", 1)
        await asyncio.sleep(0.02)
    for _ in range(100):
        if (await status(client))["computed"] >= 1:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.4)
    state = await status(client)
    assert state["computed"] == 1 and not state["clientPulls"]
    at = types.Position(2, 0)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), types.Range(at, at), types.CodeActionContext(diagnostics=[])))
    suggested = [a for a in actions if a.title == "DG: Apply the suggested edit"]
    assert len(suggested) == state["proposed"]
    if suggested:  # the action carries its edit, for clients that cannot resolve one
        change = suggested[0].edit.document_changes[0]
        assert change.text_document.version == 6 and change.edits


async def test_the_request_answers_edits_for_the_current_text_or_null(client):
    uri = (client.root / "ask.py").as_uri()
    open_doc(client, uri, SRC)
    assert await ask(client, uri) is None  # no edit yet: nothing implied
    text = rename(client, uri, 2)
    reply = plain(await ask(client, uri))
    assert (await status(client))["clientPulls"]
    if reply is not None:
        assert set(reply) == {"edits", "confidence", "version"} and reply["edits"] and reply["version"] == 2
        assert all(0.0 <= e["confidence"] <= 1.0 for e in reply["edits"])
        assert reply["confidence"] == min(e["confidence"] for e in reply["edits"])
        assert apply(text, reply["edits"]) != text


async def test_an_edit_arriving_while_computing_cancels_or_voids_the_suggestion(client):
    uri = (client.root / "race.py").as_uri()
    open_doc(client, uri, SRC)
    text = rename(client, uri, 2)
    pending = ask(client, uri)
    at = types.Position(0, 0)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(version=3, uri=uri),
        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(at, at), text="# x\n")]))
    try:
        reply = plain(await pending)
    except JsonRpcException as exc:
        assert "changed" in str(exc) or "cancel" in str(exc).lower()
    else:
        # Whichever the server saw first, it never answers with edits for a text that is gone.
        assert reply is None or reply["version"] == 3
    assert text != SRC


async def test_malformed_params_get_a_clear_error_and_the_server_stays_up(client):
    with pytest.raises(JsonRpcException, match="textDocument"):
        await client.protocol.send_request_async("dg/nextEdit", {"position": 3})
    assert (await command(client, "dg.status"))["state"] == "ready"


async def test_nothing_is_shown_below_the_confidence_bar(gated):
    uri = (gated.root / "gate.py").as_uri()
    open_doc(gated, uri, SRC)
    rename(gated, uri, 2)
    assert await ask(gated, uri) is None  # the random model is never this sure
    assert (await status(gated))["proposed"] == 0 and (await status(gated))["computed"] == 1


async def test_the_setting_turns_it_off(disabled):
    uri = (disabled.root / "off.py").as_uri()
    open_doc(disabled, uri, SRC)
    rename(disabled, uri, 2)
    assert await ask(disabled, uri) is None
    await asyncio.sleep(0.5)
    assert (await status(disabled))["computed"] == 0
