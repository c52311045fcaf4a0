"""A soak: 1,000 mixed operations with 100 cancellations against one server, RSS checked for growth.

Inline completions, completions, code-action lists and resolves, dg.status and edits (see
lsp_soak.py), the tiny model at 2 steps. Every request must be answered (cancelled ones with
RequestCancelled or their result), none with an unexpected error, and the server's RSS after the
rest must be within 5% of its RSS after a warm-up of 100 requests (both read at rest, the least of
three readings after a probe request; see lsp_soak.py).
"""

from __future__ import annotations

import pytest

from lsp_soak import SOAK_ENV, soak
from raw_client import RawServer, reliability_env, tiny_model_dir


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("soak-ws")
    srv = RawServer(reliability_env(**SOAK_ENV))  # see lsp_soak: glibc's moving mmap threshold
    srv.root = root
    srv.initialize({"model": str(tiny_model_dir()), "maxSteps": 2, "canvasLength": 8}, root=root)
    assert srv.wait_ready()["state"] == "ready"
    yield srv
    srv.close()


def test_soak_of_mixed_requests_with_cancellations_keeps_memory_flat(server):
    result = soak(server, server.root, total=1000, cancels=100, warmup=100)
    assert result.operations == 1000 and result.cancels_sent == 100
    assert result.unreplied == 0
    assert result.errors == {}, result.errors
    assert result.cancelled_replies >= 1
    assert server.alive()
    assert result.growth < 0.05, (f"RSS grew {result.growth:.1%} after the warm-up "
                                  f"({result.rss_warm_kib} -> {result.rss_end_kib} KiB)")
