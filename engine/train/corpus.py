"""The training corpus: this machine's CPython 3.11 standard library sources, split once, by name.

The embedded model is trained on code that every developer machine already has, so the corpus
needs no download. A fixed, explicitly named held-out set of modules never reaches the tokenizer
or the optimiser; validation loss is measured on it, so it tells us how the model does on code
it has not seen rather than how well it memorised.
"""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 200_000

# Directory names whose files are tests, an IDE or third-party packages, not library code.
EXCLUDED_PARTS = frozenset({"test", "tests", "idlelib", "site-packages", "__pycache__"})

# About 5% of the library's files, picked by hand across packages and styles (parsers, numerics,
# text, networking, data structures, async, email, encodings, xml). Paths are relative to stdlib.
HELD_OUT: tuple[str, ...] = (
    "fractions.py",
    "textwrap.py",
    "heapq.py",
    "bisect.py",
    "shlex.py",
    "calendar.py",
    "statistics.py",
    "difflib.py",
    "glob.py",
    "fnmatch.py",
    "queue.py",
    "sched.py",
    "netrc.py",
    "colorsys.py",
    "graphlib.py",
    "tomllib/_parser.py",
    "json/encoder.py",
    "csv.py",
    "string.py",
    "ftplib.py",
    "smtplib.py",
    "http/cookies.py",
    "urllib/robotparser.py",
    "email/_policybase.py",
    "email/quoprimime.py",
    "asyncio/queues.py",
    "asyncio/locks.py",
    "concurrent/futures/thread.py",
    "xml/dom/pulldom.py",
    "importlib/metadata/_text.py",
    "encodings/punycode.py",
    "logging/config.py",
    "multiprocessing/pool.py",
    "unittest/mock.py",
)


@dataclass(frozen=True)
class SourceFile:
    """One corpus file: its path relative to the stdlib root and its text."""

    name: str
    text: str


def stdlib_root() -> Path:
    """Where this interpreter's standard library lives."""
    return Path(sysconfig.get_paths()["stdlib"])


def _is_excluded(relative: Path) -> bool:
    return any(part in EXCLUDED_PARTS for part in relative.parts[:-1])


def list_sources(root: Path | None = None) -> list[str]:
    """Every eligible `.py` file under the root, relative, sorted so that order is deterministic."""
    root = stdlib_root() if root is None else root
    names = []
    for path in root.rglob("*.py"):
        relative = path.relative_to(root)
        if _is_excluded(relative) or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        names.append(relative.as_posix())
    return sorted(names)


def read_sources(names: list[str], root: Path | None = None) -> list[SourceFile]:
    """The texts of the named files; files that are not valid UTF-8 are skipped."""
    root = stdlib_root() if root is None else root
    files = []
    for name in names:
        try:
            text = (root / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if text.strip():
            files.append(SourceFile(name, text))
    return files


def split(root: Path | None = None, limit: int | None = None) -> tuple[list[SourceFile], list[SourceFile]]:
    """(train, validation) files; `limit` keeps only the first files of each (for tests)."""
    names = list_sources(root)
    held = set(HELD_OUT)
    train = [n for n in names if n not in held]
    val = [n for n in names if n in held]
    if limit is not None:
        train, val = train[:limit], val[: max(1, limit // 4)]
    return read_sources(train, root), read_sources(val, root)
