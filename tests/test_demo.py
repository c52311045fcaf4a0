"""`make demo` as a newcomer runs it: every step answers, the code action is resolved, nothing hangs."""

from __future__ import annotations

import subprocess
import sys

from dg_engine.tiny import cached_tiny_dir


def test_the_demo_answers_every_step_and_exits():
    run = subprocess.run([sys.executable, "-m", "dg_lsp.demo", "--model", str(cached_tiny_dir()), "--timeout", "60"],
                         capture_output=True, text=True, timeout=180)
    out = run.stdout
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and "Error sending data" not in run.stderr
    assert "model: ready" in out
    assert "== inline completion after" in out
    # The action is listed as a resolvable code action (not a bare command) and resolved.
    assert "== code actions ['DG: Fill in the middle here']; resolved 'Fill in the middle here'" in out
    assert "== paragraph rewrite {'applied': True" in out
    assert "status: {'state': 'ready'" in out
