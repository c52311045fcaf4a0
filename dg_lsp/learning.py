""""Learn this repository": `dg-lsp adapt` run from the server, beside the model that serves.

The training runs in a child process (`python -m dg_lsp adapt --json-progress`) at low priority
and on one thread, so completions go on with the loaded model meanwhile. Its JSON lines become a
work-done progress report in the editor and the `learning` part of `dg.status`. Stopping sends
SIGTERM: the child finishes its step, keeps its checkpoint (the next run continues from it) and
writes the adapter learned so far. When an adapter is written and the user's `adapter` setting
is `workspace`, the model is reloaded with it; until the reload is done the old one serves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path

from lsprotocol import types

from .progress import progress

log = logging.getLogger(__name__)


class Learner:
    def __init__(self, server):
        self.server = server
        self.process: asyncio.subprocess.Process | None = None
        self.state: dict = {"running": False}

    def status(self) -> dict:
        return dict(self.state)

    def start(self, folder: Path, minutes: float) -> dict:
        """Start learning `folder`; answers at once (the run goes on in the background)."""
        if self.state.get("running"):  # set before the child exists, so a second start waits its turn
            return {"started": False, "message": f"already learning {self.state.get('folder')}"}
        engine = self.server.settings.engine
        if engine.engine == "remote":
            return {"started": False, "message": "the remote backend's model cannot be adapted here"}
        from dg_engine.adapt import default_location

        out = default_location(folder) / "adapter"
        self.state = {"running": True, "folder": str(folder), "adapter": str(out), "percent": 0, "started": time.time()}
        asyncio.get_running_loop().create_task(self._run(folder, minutes, engine.model))
        return {"started": True, "adapter": str(out), "message": f"learning {folder} for {minutes:g} minutes"}

    def stop(self) -> dict:
        if not self.state.get("running"):
            return {"stopped": False, "message": "nothing is being learned"}
        self.state["stopping"] = True  # a child still starting is stopped as soon as it exists
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
        return {"stopped": True, "message": "stopping after the current step; the adapter so far is kept"}

    async def _run(self, folder: Path, minutes: float, model: str) -> None:
        cmd = [sys.executable, "-m", "dg_lsp", "adapt", str(folder), "--json-progress", "--minutes", str(minutes),
               "--model", model, "--threads", "1"]
        title = f"DG: learning {folder.name}"
        async with progress(self.server, title, "reading the files") as token:
            try:
                self.process = await asyncio.create_subprocess_exec(
                    *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
            except OSError as exc:
                self._finish(f"could not start the adaptation: {exc}", ok=False)
                return
            if self.state.get("stopping"):
                self.process.terminate()
            done = None
            assert self.process.stdout is not None
            async for line in self.process.stdout:
                event = _parse(line)
                if event.get("event") == "progress":
                    self.state.update(percent=event["percent"], step=event["step"], loss=event["loss"])
                    if token is not None:
                        self.server.work_done_progress.report(token, types.WorkDoneProgressReport(
                            message=f"step {event['step']}, {event['minutes']:.1f} of {minutes:g} min",
                            percentage=int(event["percent"])))
                elif event.get("event") == "files":
                    self.state["files"] = event["count"]
                elif event.get("event") == "done":
                    done = event
            stderr = (await self.process.stderr.read()).decode(errors="replace") if self.process.stderr else ""
            code = await self.process.wait()
        if code == 0 and done is not None:
            self._finish(f"learned {folder.name}: {done['steps']} steps on {done['files']} files", ok=True, done=done)
        else:
            last = stderr.strip().splitlines()[-1:] or [f"exit status {code}"]
            self._finish(f"learning {folder.name} failed: {last[0]}", ok=False)

    def _finish(self, message: str, ok: bool, done: dict | None = None) -> None:
        self.state.update(running=False, message=message, ok=ok, finished=time.time())
        self.state.pop("stopping", None)
        if not ok:
            self.server.show_warning(f"dg-lsp: {message}")
            return
        if self.server.settings.engine.adapter == "workspace":
            self.server.show_message_threadsafe(f"dg-lsp: {message}; loading the adapter", types.MessageType.Info)
            self.server.reload_model(force=True)
        else:
            self.server.show_message_threadsafe(
                f"dg-lsp: {message}. Set `adapter` to \"workspace\" in your user settings to use it",
                types.MessageType.Info)


def _parse(line: bytes) -> dict:
    try:
        value = json.loads(line)
        return value if isinstance(value, dict) else {}
    except ValueError:
        log.debug("adapt printed %r", line[:200])
        return {}
