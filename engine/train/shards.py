"""The corpus packed into one compressed file that travels to a machine without network access.

A lent GPU machine reaches no package registry, and what travels with the working tree is capped
(64 MB in all), so `pack` writes a deterministic sample of the built corpus as xz-compressed JSON
Lines under a size budget, and `unpack` turns it back into a corpus folder that the trainer reads
as usual (its token streams are rebuilt there in a minute). Documents are sampled by a hash of
their source and path, so every distribution keeps the same share and a second pack of the same
corpus is the same file; the held-out modules were never in the corpus, so they cannot travel.

    python -m dg_engine.train.shards pack shards/corpus.jsonl.xz [--max-mb 60]
    python -m dg_engine.train.shards unpack shards/corpus.jsonl.xz DIR   # then DG_LSP_CORPUS=DIR
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
from collections import defaultdict
from pathlib import Path

from .documents import KINDS, default_cache_dir, documents_path, iter_documents, write_documents

SAMPLE_BYTES = 4_000_000  # text compressed once to estimate the ratio


def _keep(source: str, path: str, share: float) -> bool:
    digest = hashlib.sha256(f"{source}/{path}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def _line(kind: str, doc) -> bytes:
    return (json.dumps({"kind": kind, "source": doc.source, "path": doc.path, "text": doc.text},
                       ensure_ascii=False) + "\n").encode("utf-8")


def pack(out: Path, cache_dir: Path | None = None, max_bytes: int = 60 * 2**20, log=print) -> dict:
    """Write a sample of the corpus that compresses to at most `max_bytes`; returns counts."""
    cache = default_cache_dir() if cache_dir is None else cache_dir
    total, sample = 0, bytearray()
    for kind in KINDS:
        for doc in iter_documents(cache, kind):
            line = _line(kind, doc)
            total += len(line)
            if len(sample) < SAMPLE_BYTES:
                sample += line
    ratio = len(sample) / max(1, len(lzma.compress(bytes(sample), preset=6)))
    share = min(1.0, 0.95 * max_bytes * ratio / max(1, total))
    out.parent.mkdir(parents=True, exist_ok=True)
    # The ratio is an estimate; a pack that still comes out too large is redone with a smaller share.
    for _ in range(4):
        counts = _write(out, cache, share)
        size = out.stat().st_size
        if size <= max_bytes or share == 0:
            break
        share *= 0.97 * max_bytes / size
    else:
        raise RuntimeError(f"could not pack the corpus under {max_bytes} bytes")
    log(f"packed {counts} documents ({share:.0%} of the corpus) into {out} ({size / 2**20:.1f} MB)")
    return {"share": share, "documents": counts, "bytes": size}


def _write(out: Path, cache: Path, share: float) -> dict[str, int]:
    tmp = out.with_name(out.name + ".tmp")
    counts: dict[str, int] = defaultdict(int)
    with lzma.open(tmp, "wb", preset=6) as f:
        for kind in KINDS:
            for doc in iter_documents(cache, kind):
                if _keep(doc.source, doc.path, share):
                    f.write(_line(kind, doc))
                    counts[kind] += 1
    os.replace(tmp, out)
    return dict(counts)


def unpack(packed: Path, cache_dir: Path, log=print) -> dict:
    """Write the packed documents back as a corpus folder; returns documents per kind."""
    grouped: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    with lzma.open(packed, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            grouped[(row["kind"], row["source"])].append((row["path"], row["text"]))
    counts: dict[str, int] = defaultdict(int)
    for (kind, source), docs in grouped.items():
        counts[kind] += write_documents(documents_path(cache_dir, kind, source), docs)
    log(f"unpacked {dict(counts)} documents into {cache_dir}")
    return dict(counts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dg_engine.train.shards", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("pack")
    a.add_argument("out")
    a.add_argument("--cache", default=None)
    a.add_argument("--max-mb", type=float, default=60.0)
    b = sub.add_parser("unpack")
    b.add_argument("packed")
    b.add_argument("cache")
    args = p.parse_args(argv)
    if args.command == "pack":
        pack(Path(args.out), Path(args.cache) if args.cache else None, int(args.max_mb * 2**20))
    else:
        unpack(Path(args.packed), Path(args.cache))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
