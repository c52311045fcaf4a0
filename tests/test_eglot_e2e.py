"""Emacs eglot, an LSP client that is not ours, against the real server and the tiny random model.

`emacs --batch -Q -l tests/emacs/eglot_e2e.el` starts the server from `eglot-server-programs`,
takes a completion item through eglot's completion-at-point function, applies the "Fill in the
middle here" code action through eglot's own code-action path (eglot 1.9 cannot resolve an
action's edit, so the server offers it as a `dg.infill` command that applies the edit with
workspace/applyEdit), runs `dg.documentHash` with a standard `TextDocumentIdentifier`, and shuts
the server down. The model writes noise, so the checks are about where the text went and that the
server's copy of the buffer matches Emacs's, never about what the text says.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lsp_helpers import server_env, tiny_model_dir

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "emacs" / "eglot_e2e.el"
PREFIX = "def area(width, height):\n    return "
SUFFIX = "\n\n\ndef main():\n    print(area(2, 3))\n"


def test_eglot_completes_applies_a_code_action_and_runs_a_command(tmp_path):
    emacs = shutil.which("emacs")
    assert emacs, "Emacs is needed for this test: apt-get install emacs-nox elpa-eglot (.ci/run installs them)"
    report = tmp_path / "report.json"
    env = dict(server_env(), DG_E2E_PYTHON=sys.executable, DG_E2E_MODEL=str(tiny_model_dir()),
               DG_E2E_DIR=str(tmp_path), DG_E2E_REPORT=str(report), HOME=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([emacs, "--batch", "-Q", "-l", str(DRIVER)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert report.exists(), proc.stderr[-3000:]
    seen = json.loads(report.read_text())
    assert "error" not in seen, (seen["error"], proc.stderr[-3000:])
    assert seen["connected"] and seen["server_name"] == "dg-lsp"
    assert seen["status_model"] == str(tiny_model_dir())
    # A completion item reached eglot's completion table.
    assert seen["completion_count"] >= 1 and isinstance(seen["completion_first"], str)
    # The code action's fill landed in the hole, and nowhere else.
    assert "DG: Fill in the middle here" in seen["action_titles"]
    before, after = seen["buffer_before_action"], seen["buffer_after_action"]
    assert before == PREFIX + SUFFIX and after != before
    assert after.startswith(PREFIX.rstrip()) and after.endswith(SUFFIX)
    # The server's copy of the buffer is Emacs's copy, edit included.
    assert seen["hash_version"] >= 1
    assert seen["hash_sha256"] == hashlib.sha256(seen["buffer_final"].encode("utf-8")).hexdigest()
    assert seen["shutdown"] is True
