"""The remote backend against a real vLLM server: run by `make test-vllm`, not by `make test`.

`scripts/vllm_test.sh` starts vLLM on 127.0.0.1 and points DG_VLLM_URL at it. These tests drive
the backend (in process, with its HTTP client wrapped by a `Recorder`) and the real language
server (over stdio, with `engine = "remote"`) through that server, and write what the server
answered to tests/fixtures/vllm/, which the default suite replays. The file's name keeps it out of
the default collection; the script passes it to pytest explicitly.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from dg_engine import Cancelled, EngineConfig, FillRequest
from dg_engine.remote import RemoteEngine
from dg_engine.remote_http import RemoteResponseError
from lsp_helpers import command, open_doc, open_session, position_of, server_command, server_env
from remote_fixtures import Recorder

URL = os.environ.get("DG_VLLM_URL", "http://127.0.0.1:8765/v1")
CONFIG = EngineConfig(engine="remote", base_url=URL, max_steps=8, timeout=120.0)
PREFIX = "def add(a, b):\n    total = "
SUFFIX = "\n    return total\n"


def recorded() -> tuple[RemoteEngine, Recorder]:
    engine = RemoteEngine(CONFIG)
    recorder = Recorder(engine.client).install(engine)
    engine.connect()
    return engine, recorder


def test_connect_learns_the_served_model_and_its_sentinels():
    engine, recorder = recorded()
    info = engine.info()
    assert info["health"] == "ok" and info["format"] == "fim" and info["serverVersion"]
    assert engine.served.fim.fim_prefix == "<fim_prefix>" and engine.served.ids["end"] >= 0
    recorder.save("connect", "GET /v1/models and /version, then /tokenize of each sentinel spelling")


def test_infill_multi_canvas_drafts_and_lengths():
    engine, recorder = recorded()
    result = engine.fill(FillRequest(PREFIX, SUFFIX))
    best = result.candidates[0]
    assert result.prompt_tokens > 0 and best.token_ids and len(best.token_offsets) == len(best.token_ids)
    assert best.text == "".join(best.text[a:b] for a, b in best.token_offsets) or best.token_offsets[-1][1] <= len(best.text)
    drafts: list[str] = []
    engine.fill(FillRequest("def add(a, b):\n    ", "\n", canvas_length=16, max_canvases=3),
                on_step=lambda i, rows: drafts.append(engine.draft_text(rows[0].tolist())))
    assert drafts and all(isinstance(d, str) for d in drafts)
    lengths = engine.fill(FillRequest(PREFIX, SUFFIX, lengths=(8, 16), n=2))
    assert sorted({c.length for c in lengths.candidates}) == [8, 16] and len(lengths.candidates) == 4
    recorder.save("infill", "a plain infill, a 3-canvas fill with drafts, and two lengths with n=2")


def test_rewrite_is_seeded_with_the_current_text():
    engine, recorder = recorded()
    result = engine.fill(FillRequest("def add(a, b):\n    ", SUFFIX, seed_text="total = a + b", renoise_fraction=0.25))
    body = [e for e in recorder.exchanges if e["path"] == "/v1/completions" and "events" in e][-1]["body"]
    assert "diffusion_seed_canvas" in body["vllm_xargs"] and result.candidates
    recorder.save("rewrite", "a rewrite seeded with the current text (a quarter re-noised)")


def test_joint_fill_pins_the_known_text():
    engine, recorder = recorded()
    result = engine.fill(FillRequest("def f(x):\n    ", "\n", segments=(8, "\n    y = x\n    ", 8)))
    best = result.candidates[0]
    assert len(best.holes) == 2 and "y = x" in best.text
    recorder.save("joint", "two holes on one canvas with the text between them pinned")


def test_pinned_suffix_layout_is_accepted_and_read_back():
    engine = RemoteEngine(replace(CONFIG, prompt_format="pinned"))
    recorder = Recorder(engine.client).install(engine)
    engine.connect()
    result = engine.fill(FillRequest(PREFIX, SUFFIX, canvas_length=16))
    bodies = [e["body"] for e in recorder.exchanges if e["path"] == "/v1/completions" and "events" in e]
    assert len(bodies) == 2 and all(b["vllm_xargs"]["diffusion_pinned"] for b in bodies)
    assert result.candidates and all(c.finished for c in result.candidates)
    recorder.save("pinned", "the suffix's first tokens pinned after 8 and 16 free positions")


def test_renoise_keeps_the_pinned_tokens():
    engine, recorder = recorded()
    request = FillRequest(PREFIX, SUFFIX)
    cand = engine.fill(request).candidates[0]
    again = engine.renoise(request, cand, [0, 1])
    # The server ends the answer at its first stop token; up to there the pinned tokens stand.
    end = next((i for i, t in enumerate(again.canvas) if t in engine.served.stop_ids), len(again.canvas))
    assert again.canvas[2:end] == cand.canvas[2:end] and again.length == cand.length
    recorder.save("renoise", "a fill, then its first two canvas positions denoised again, the rest pinned")


def test_options_refused_for_diffusion_models_are_refused():
    engine, recorder = recorded()
    with pytest.raises(RemoteResponseError) as caught:
        engine.client.post("/v1/completions", {"model": engine.served.model, "prompt": "x", "max_tokens": 4,
                                               "temperature": 0.5})
    assert caught.value.status == 400 and "temperature" in str(caught.value)
    recorder.save("refused", "vLLM answers 400 to temperature for a diffusion model")


def test_cancel_closes_the_request_and_the_server_keeps_serving():
    engine = RemoteEngine(CONFIG)
    engine.connect()

    class Soon:
        def __init__(self):
            self.at = time.monotonic() + 0.05

        def is_cancelled(self):
            return time.monotonic() > self.at

    started = time.monotonic()
    with pytest.raises(Cancelled):
        engine.fill(FillRequest(PREFIX, SUFFIX, max_canvases=16, canvas_length=32), cancel=Soon())
    assert time.monotonic() - started < 1.0
    assert engine.client.open_exchanges == 0
    assert engine.fill(FillRequest(PREFIX, SUFFIX)).candidates


def test_timings_for_the_record(tmp_path):
    """32-token fills through vLLM, after the first request compiled (written for the README)."""
    engine = RemoteEngine(CONFIG)
    engine.connect()
    times = []
    for _ in range(5):
        started = time.perf_counter()
        engine.fill(FillRequest(PREFIX, SUFFIX, canvas_length=32))
        times.append((time.perf_counter() - started) * 1000)
    out = os.environ.get("DG_VLLM_TIMINGS")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({"fill32_ms": times}) + "\n")
    assert all(t > 0 for t in times)


# --- The real language server, with engine = "remote" --------------------------------------------

@pytest_lsp.fixture(config=ClientServerConfig(server_command=server_command(), server_env=server_env()), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    lsp_client.applied = []

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply(params):
        lsp_client.applied.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    options = {"engine": "remote", "baseUrl": URL, "timeout": 120, "syntaxRepair": False}
    assert (await open_session(lsp_client, tmp_path_factory, options))["state"] == "ready"
    yield
    await lsp_client.shutdown_session()


async def test_lsp_inline_completion_through_vllm(client):
    text, pos = position_of("def area(w, h):\n    return <|>\n", "<|>")
    uri = (client.root / "inline.py").as_uri()
    open_doc(client, uri, text)
    status = await command(client, "dg.status")
    assert status["backend"] == "remote" and status["health"] == "ok" and status["model"]
    before = status["forwardPasses"]
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri), position=pos))
    assert (await command(client, "dg.status"))["forwardPasses"] > before
    assert result is not None
    for item in result.items:
        assert item.range.start == pos


async def test_lsp_fill_code_action_and_rewrite_through_vllm(client):
    text, pos = position_of("def todo(x):\n    ...\n\n\ndef main():\n    <|>\n", "<|>")
    uri = (client.root / "actions.py").as_uri()
    open_doc(client, uri, text)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), types.Range(pos, pos), types.CodeActionContext(diagnostics=[])))
    fill = next(a for a in actions if a.title == "DG: Fill in the middle here")
    resolved = await client.code_action_resolve_async(fill)
    assert resolved.edit is None or resolved.edit.document_changes[0].edits[0].range.start == pos
    sel = types.Range(types.Position(1, 4), types.Position(1, 7))
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), sel, types.CodeActionContext(diagnostics=[])))
    rewrite = next(a for a in actions if a.kind == types.CodeActionKind.RefactorRewrite)
    await client.code_action_resolve_async(rewrite)
    assert not [m for m in client.messages if "cannot reach" in m.message or "answered" in m.message]
