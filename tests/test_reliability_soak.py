"""A soak: 1,000 mixed operations with 100 cancellations against one server, RSS checked for growth.

Inline completions, completions, code-action lists and resolves, dg.status and edits (see
lsp_soak.py), the tiny model at 2 steps, syntax repair off (it only adds model rounds). Every
request must be answered (cancelled ones with RequestCancelled or their result), none with an
unexpected error, and the server's RSS after the rest must be within 5% of its RSS after a
warm-up of 100 requests (read at rest, after a probe request, Python's collector and glibc's
malloc_trim; the end figure is the floor of the readings over the last fifth of the run: see
lsp_soak.py for why).
"""

from __future__ import annotations

import pytest

from lsp_soak import SOAK_SETTINGS, soak
from raw_client import RawServer, reliability_env


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("soak-ws")
    srv = RawServer(reliability_env(faults=True))  # dg.test.gc: RSS is read after gc + malloc_trim
    srv.root = root
    srv.initialize(SOAK_SETTINGS, root=root)
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
