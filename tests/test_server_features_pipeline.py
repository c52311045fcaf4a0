"""Syntax-guided re-noising and variable-length holes, observed through the real server.

Both run inside every fill the server makes; these tests turn each one on and off through
`workspace/didChangeConfiguration` and read what the fill did from `dg.status` (`lastFill`) and the
engine's forward-pass counter. Fills are seeded, so the same request gives the same canvas twice.
"""

from __future__ import annotations

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_helpers import command, open_doc, open_session, position_of, server_command, server_env, tiny_model_dir

MAX_STEPS = 4


@pytest_lsp.fixture(config=ClientServerConfig(server_command=server_command(), server_env=server_env()), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    status = await open_session(lsp_client, tmp_path_factory, {"model": str(tiny_model_dir()), "maxSteps": MAX_STEPS})
    assert status["state"] == "ready"
    yield
    await lsp_client.shutdown_session()


def configure(client, **values) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dgLsp": values}))


async def settled(client, key: str, value) -> None:
    """Wait until the server has applied a setting (notifications have no reply)."""
    for _ in range(100):
        status = await command(client, "dg.status")
        if status["settings"].get(key) == value:
            return
    raise AssertionError(f"{key} never became {value!r}")


async def inline_fill(client, uri: str, pos: types.Position) -> tuple[dict, int]:
    """One inline completion; returns dg.status' lastFill and the forward passes it cost."""
    before = (await command(client, "dg.status"))["forwardPasses"]
    await client.text_document_inline_completion_async(types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri), position=pos))
    status = await command(client, "dg.status")
    return status["lastFill"], status["forwardPasses"] - before


async def fim_action(client, uri: str, pos: types.Position) -> dict:
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), types.Range(pos, pos), types.CodeActionContext(diagnostics=[])))
    fim = next(a for a in actions if a.title == "DG: Fill in the middle here")
    await client.code_action_resolve_async(fim)
    return (await command(client, "dg.status"))["lastFill"]


async def test_syntax_repair_renoises_a_fill_that_breaks_the_file(client):
    # Between a `def`'s parameters and its colon no start of the untrained model's tokens parses
    # (only `->` could), so even salvaged the unrepaired fill adds a syntax error; the seed makes
    # that reproducible.
    text, pos = position_of("def total(xs)<|>:\n    return sum(xs)\n\n\nprint(total([1, 2]))\n", "<|>")
    uri = (client.root / "repair.py").as_uri()
    open_doc(client, uri, text)

    configure(client, syntaxRepair=False)
    await settled(client, "syntaxRepair", False)
    off, off_passes = await inline_fill(client, uri, pos)
    assert off["feature"] == "inline" and off["repairRounds"] == 0
    assert off["addsSyntaxErrors"], "the unrepaired fill was expected to break the file"
    assert off_passes <= MAX_STEPS

    # The inline budget is lifted: on a loaded machine even the tiny model's fill can outlast it.
    configure(client, syntaxRepair=True, repairRounds=2, inline={"repairBudgetMs": 60000})
    await settled(client, "syntaxRepair", True)
    on, on_passes = await inline_fill(client, uri, pos)
    assert 1 <= on["repairRounds"] <= 2
    # Each round is a further denoising of the re-noised tokens, on top of the first pass.
    assert on_passes > off_passes

    # With no time for it, ghost text is not repaired (and the fill above is not served from the
    # result cache, whose key holds the repair settings).
    configure(client, inline={"repairBudgetMs": 0})
    await settled(client, "inlineRepairBudgetMs", 0)
    rushed, rushed_passes = await inline_fill(client, uri, pos)
    assert rushed["repairRounds"] == 0 and rushed["addsSyntaxErrors"]
    assert rushed_passes == off_passes


async def test_valid_only_hides_ghost_text_that_would_break_the_file(client):
    # The same seeded, unrepaired fill as above breaks the file; with inline.validOnly the server
    # still makes it (dg.status says so) but shows nothing, and shows it again once switched off.
    text, pos = position_of("def total(xs)<|>:\n    return sum(xs)\n\n\nprint(total([1, 2]))\n", "<|>")
    uri = (client.root / "valid_only.py").as_uri()
    open_doc(client, uri, text)
    params = types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri), position=pos)

    configure(client, syntaxRepair=False, inline={"validOnly": True})
    await settled(client, "inlineValidOnly", True)
    hidden = await client.text_document_inline_completion_async(params)
    last = (await command(client, "dg.status"))["lastFill"]
    assert not hidden.items
    assert last["hidden"] and last["addsSyntaxErrors"] and last["feature"] == "inline"

    completion = await client.text_document_completion_async(types.CompletionParams(
        types.TextDocumentIdentifier(uri), pos))
    assert not completion or not completion.items
    assert (await command(client, "dg.status"))["lastFill"]["hidden"]

    configure(client, inline={"validOnly": False})
    await settled(client, "inlineValidOnly", False)
    shown = await client.text_document_inline_completion_async(params)
    last = (await command(client, "dg.status"))["lastFill"]
    assert shown.items and shown.items[0].insert_text and not last["hidden"]
    assert last["addsSyntaxErrors"]


async def test_variable_length_tries_several_canvases_in_one_batch(client):
    text, pos = position_of("def scale(xs, k):\n    <|>\n\n\ndef main():\n    pass\n", "<|>")
    uri = (client.root / "lengths.py").as_uri()
    open_doc(client, uri, text)
    configure(client, syntaxRepair=False, variableLength=True)
    await settled(client, "variableLength", True)
    before = (await command(client, "dg.status"))["forwardPasses"]
    varied = await fim_action(client, uri, pos)
    passes = (await command(client, "dg.status"))["forwardPasses"] - before
    assert varied["canvasLengths"] == [16, 32, 64]
    assert varied["chosenLength"] in varied["canvasLengths"]
    assert passes <= MAX_STEPS  # the three lengths share one batch, not three runs

    configure(client, variableLength=False)
    await settled(client, "variableLength", False)
    fixed = await fim_action(client, uri, pos)
    assert len(fixed["canvasLengths"]) == 1 and fixed["chosenLength"] == fixed["canvasLengths"][0]
