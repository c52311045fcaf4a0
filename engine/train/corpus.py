"""The training corpus: this machine's CPython 3.11 standard library sources, split once, by name.

The embedded model is trained on code that every developer machine already has, so the corpus
needs no download. A fixed, explicitly named held-out set of modules never reaches the tokenizer
or the optimiser; validation loss is measured on it, so it tells us how the model does on code
it has not seen rather than how well it memorised. The library's own test suites can be added to
the training side (`split(with_tests=True)`), without the tests of the held-out modules.
"""

from __future__ import annotations

import ast
import sys
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 200_000

# Directory names whose files are an IDE, third-party packages or build leftovers.
EXCLUDED_PARTS = frozenset({"idlelib", "site-packages", "__pycache__"})
# Directory names of the library's own test suites: more code in the same style, optional.
TEST_PARTS = frozenset({"test", "tests"})

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


def _is_test(relative: Path) -> bool:
    return any(part in TEST_PARTS for part in relative.parts[:-1])


def _is_excluded(relative: Path) -> bool:
    return any(part in EXCLUDED_PARTS for part in relative.parts[:-1])


def list_sources(root: Path | None = None, tests: bool = False) -> list[str]:
    """Every eligible `.py` file under the root, relative, sorted so that order is deterministic.

    With `tests`, the files of the library's test suites instead of the library itself.
    """
    root = stdlib_root() if root is None else root
    names = []
    for path in root.rglob("*.py"):
        relative = path.relative_to(root)
        if _is_excluded(relative) or _is_test(relative) != tests:
            continue
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        names.append(relative.as_posix())
    return sorted(names)


def _name_tokens(part: str) -> set[str]:
    """`test_http_cookies.py` -> {"http", "cookies"}; `testmock` -> {"mock"}; `_parser` -> {"parser"}."""
    stem = part.removesuffix(".py").removeprefix("test_").removeprefix("test")
    return {t for t in stem.split("_") if t}


def held_out_names() -> frozenset[str]:
    """Every name a held-out path is made of (`json/encoder.py` -> json, encoder)."""
    return frozenset(t for name in HELD_OUT for part in name.split("/") for t in _name_tokens(part))


def usable_test_file(file: "SourceFile", held: frozenset[str]) -> bool:
    """A test file may be trained on if Python 3.11 parses it and it does not test held-out code.

    The suites keep deliberately broken and Python 2 files as test data; those would teach wrong
    syntax. The tests of a held-out module (`test/test_fractions.py`, `test/test_email/...`) hold
    its API calls next to their exact results, which would leak the held-out code into training,
    so any test whose directory or file name shares a word with a held-out path is left out. This
    is deliberately broad (`thread` from `concurrent/futures/thread.py` also drops `test_thread.py`).
    Tests that merely use a held-out module are kept, as library files that use one are.
    """
    if any(_name_tokens(part) & held for part in file.name.split("/")):
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(file.text, file.name)
    except (SyntaxError, ValueError):
        return False
    return True


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


def split(
    root: Path | None = None, limit: int | None = None, with_tests: bool = False
) -> tuple[list[SourceFile], list[SourceFile]]:
    """(train, validation) files; `limit` keeps only the first files of each (for tests).

    `with_tests` adds the usable files of the library's test suites to the training side; the
    validation side is always the held-out library modules alone.
    """
    names = list_sources(root)
    held = set(HELD_OUT)
    train = [n for n in names if n not in held]
    val = [n for n in names if n in held]
    if limit is not None:
        train, val = train[:limit], val[: max(1, limit // 4)]
    train_files = read_sources(train, root)
    if with_tests:
        tests = list_sources(root, tests=True)
        if limit is not None:
            tests = tests[:limit]
        held_names = held_out_names()
        train_files += [f for f in read_sources(tests, root) if usable_test_file(f, held_names)]
    return train_files, read_sources(val, root)


def main(argv: list[str] | None = None) -> int:
    """`python -m dg_engine.train.corpus build [--cache DIR] [--only NAME,...] [--skip-download]`.

    The builder (downloads, rules, dedup, manifest) lives in `corpus_build.py`; this module stays
    the light, dependency-free definition of the stdlib split that the rest of training imports.
    """
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "build":
        print("usage: python -m dg_engine.train.corpus build [--cache DIR] [--only NAME,...]"
              " [--skip-download] [--workers N]")
        return 2
    try:
        from .corpus_build import main as build_main
    except ModuleNotFoundError as exc:
        if exc.name != "datasketch":
            raise
        # Building the corpus is training work; the server's install leaves its libraries out.
        print("building the corpus needs the training extra: pip install 'dg-lsp[train]'", file=sys.stderr)
        return 2
    return build_main(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
