"""Adapters: the model fine-tuned on one workspace's own code (`dg-lsp adapt`).

`files` chooses what may be learned from, `train` learns it with the base run's objective, and
`adapter` writes, checks and applies the result. `default_location` is where an adapter for a
workspace lives: the user's cache, keyed by the workspace's path, never inside the workspace.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dg-lsp" / "adapters"


def default_location(workspace: Path) -> Path:
    """The adapter directory for a workspace: `<cache>/<folder name>-<hash of its path>`."""
    root = Path(workspace).resolve()
    key = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return cache_root() / f"{root.name or 'root'}-{key}"
