"""The user's config file (`dg-lsp.toml`) and workspace files, watched for changes.

The user's file lives in the user's config directory ($XDG_CONFIG_HOME/dg-lsp/dg-lsp.toml, or
~/.config/dg-lsp/dg-lsp.toml) and may set everything. A workspace folder may carry a
`.dg-lsp.toml` too, but since opening a repository must not choose what code runs, the model,
device, dtype, quantization and threads are ignored there. Both are watched with watchfiles; a
change re-reads them, and a changed model reloads in the background.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tomllib
from pathlib import Path

log = logging.getLogger(__name__)

USER_FILE = "dg-lsp.toml"
WORKSPACE_FILE = ".dg-lsp.toml"


def user_config_path() -> Path:
    explicit = os.environ.get("DG_LSP_CONFIG")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "dg-lsp" / USER_FILE


def _read(path: Path) -> tuple[dict | None, str | None]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return None, f"could not read {path}: {exc}"


class ConfigFiles:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self._task: asyncio.Task | None = None

    def paths(self, folders: list[Path]) -> list[tuple[Path, bool]]:
        return [(user_config_path(), True)] + [(f / WORKSPACE_FILE, False) for f in folders]

    def read(self, folders: list[Path]):
        """(values, trusted, source) for each config file that exists, user file first."""
        self.problems = []
        out = []
        for path, trusted in self.paths(folders):
            values, problem = _read(path)
            if problem:
                self.problems.append(problem)
                log.warning(problem)
            if values:
                out.append((values, trusted, str(path)))
        return out

    def watch(self, server, folders: list[Path]) -> None:
        """Watch the config files' directories; runs on the server's event loop."""
        dirs = sorted({str(p.parent) for p, _ in self.paths(folders) if p.parent.is_dir()})
        if not dirs or self._task is not None:
            return
        names = {str(p) for p, _ in self.paths(folders)}
        self._task = asyncio.get_running_loop().create_task(self._watch(server, dirs, names))

    async def _watch(self, server, dirs: list[str], names: set[str]) -> None:
        from watchfiles import awatch

        try:
            async for changes in awatch(*dirs, recursive=False, debounce=200):
                if any(path in names for _, path in changes):
                    log.info("config file changed; reloading settings")
                    server.reload_config()
        except Exception:  # A watcher failing (e.g. a removed directory) must not stop the server.
            log.exception("config watcher stopped")
