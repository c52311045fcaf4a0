"""The corpus cache on disk: where it lives, how its JSON Lines files are written and read back.

The built corpus is hundreds of megabytes of other projects' files, so it lives in a cache folder
outside the repository (`~/.cache/dg-lsp/corpus`, or `$DG_LSP_CORPUS`) and only its manifest is
committed. Each source has one file per kind, `documents/<kind>/<source>.jsonl`, one
`{"path", "text"}` object a line in sorted path order; files are replaced atomically, so a
reader never sees half a file even while a build is running.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

ENV_VARIABLE = "DG_LSP_CORPUS"
KINDS = ("python", "prose")
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class Document:
    """One kept file: the source it came from (`numpy`, `cpython-stdlib`), its path there, its text."""

    source: str
    path: str
    text: str


def default_cache_dir() -> Path:
    """`$DG_LSP_CORPUS` if set, else `~/.cache/dg-lsp/corpus`."""
    configured = os.environ.get(ENV_VARIABLE)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "dg-lsp" / "corpus"


def documents_path(cache_dir: Path, kind: str, source: str) -> Path:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    return cache_dir / "documents" / kind / f"{source}.jsonl"


def write_atomic(path: Path, data: str) -> None:
    """Write a file through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_documents(path: Path, documents: Iterable[tuple[str, str]]) -> int:
    """Write (path, text) pairs as JSON Lines, sorted by path; returns how many were written."""
    rows = sorted(documents)
    lines = [json.dumps({"path": p, "text": t}, ensure_ascii=False) + "\n" for p, t in rows]
    write_atomic(path, "".join(lines))
    return len(rows)


def _source_order(cache_dir: Path, kind: str) -> list[str]:
    """Sources in build order (the manifest's), then any other file present, by name."""
    folder = cache_dir / "documents" / kind
    present = sorted(p.stem for p in folder.glob("*.jsonl")) if folder.is_dir() else []
    ordered: list[str] = []
    manifest = cache_dir / MANIFEST_NAME
    if manifest.is_file():
        ordered = [s["name"] for s in json.loads(manifest.read_text(encoding="utf-8"))["sources"]]
    return [s for s in ordered if s in present] + [s for s in present if s not in ordered]


def iter_documents(
    cache_dir: Path | str | None = None, kind: str = "python", sources: Iterable[str] | None = None
) -> Iterator[Document]:
    """Every kept document of one kind ("python" or "prose"), source by source in build order.

    `sources` restricts the reading to the named sources. Raises FileNotFoundError when the
    cache has no documents of that kind (the corpus has not been built).
    """
    cache = default_cache_dir() if cache_dir is None else Path(cache_dir)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    order = _source_order(cache, kind)
    if not order:
        raise FileNotFoundError(
            f"no {kind} documents under {cache}: run `python -m dg_engine.train.corpus build`"
        )
    wanted = None if sources is None else set(sources)
    for source in order:
        if wanted is not None and source not in wanted:
            continue
        with documents_path(cache, kind, source).open(encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                yield Document(source, row["path"], row["text"])
