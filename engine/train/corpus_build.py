"""`python -m dg_engine.train.corpus build`: the training corpus, assembled into the cache folder.

Sources are the CPython 3.11 standard library (training split of `corpus.split()`, held-out
modules never written) and the distributions pinned in `distributions.lock`, read in that order.
Each archive is scanned in a worker process (licence, file rules, prose extraction, MinHash);
the main process then deduplicates in the fixed source and path order, so that the first copy of
a file is the one kept whatever the timing, writes `documents/<kind>/<source>.jsonl`, counts
tokens with the shipped tokenizer and writes the manifest: into the cache always, and into the
repository (`corpus_manifest.json`) after a full build.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from packaging.utils import canonicalize_name

from . import corpus
from .dedup import HELD_OUT_PREFIX, Deduplicator, Signature, signature
from .documents import (
    KINDS,
    MANIFEST_NAME,
    default_cache_dir,
    documents_path,
    write_atomic,
    write_documents,
)
from .fetch import (
    LOCK_FILE,
    Pin,
    download,
    find_archive,
    is_metadata_file,
    iter_members,
    parse_metadata,
    read_lock,
)
from .filters import MAX_FILE_BYTES, Licence, decode, licence_of, python_file_rule, vendored
from .manifest import (
    MANIFEST_PATH,
    REPO_ROOT,
    TARGETS,
    TOKENIZER_PATH,
    TokenCounter,
    make_manifest,
    source_entry,
)
from .prose import (
    CHANGELOG_BUDGET_CHARS,
    MAX_PROSE_BYTES,
    is_changelog,
    is_prose_candidate,
    prose_file_rule,
)

STDLIB_SOURCE = "cpython-stdlib"
STDLIB_VERSION = "3.11"
STDLIB_LICENCE = "PSF-2.0"


@dataclass(frozen=True)
class SourceSpec:
    """One source to scan: a distribution's archive, or the stdlib when `archive` is None."""

    name: str
    version: str
    archive: Path | None = None
    stdlib_root: Path | None = None
    error: str | None = None


@dataclass
class Candidate:
    """A file that passed the per-file rules, waiting for deduplication."""

    kind: str
    path: str
    text: str
    signature: Signature | None = None  # computed once the licence is known to be permissive


@dataclass
class SourceScan:
    """What a worker found in one source."""

    spec: SourceSpec
    licence: Licence
    candidates: list[Candidate] = field(default_factory=list)
    dropped: dict[str, Counter] = field(default_factory=lambda: {k: Counter() for k in KINDS})


def _scan_files(
    files: Iterable[tuple[str, int, bytes | None]], scan: SourceScan, meta: Callable[[str], bool]
) -> str | None:
    """Apply the per-file rules to archive members; returns the metadata text if one was seen."""
    metadata = None
    for path, size, data in files:
        if meta(path):
            metadata = decode(data or b"")
            continue
        if path.endswith(".py"):
            kind, (rule, text) = "python", python_file_rule(path, size, data)
        elif is_prose_candidate(path):
            kind, (rule, text) = "prose", prose_file_rule(path, size, data)
        else:
            continue
        if rule is not None or text is None:
            scan.dropped[kind][rule or "empty"] += 1
        else:
            scan.candidates.append(Candidate(kind, path, text))
    return metadata


def _wanted(wheel: bool) -> Callable[[str, int], bool]:
    """Which members are worth decompressing: metadata, and code or docs within the size limits."""

    def wanted(path: str, size: int) -> bool:
        if is_metadata_file(path, wheel):
            return True
        if vendored(path):
            return False
        if path.endswith(".py"):
            return size <= MAX_FILE_BYTES
        return size <= MAX_PROSE_BYTES and is_prose_candidate(path)

    return wanted


def scan_source(spec: SourceSpec) -> SourceScan:
    """Licence and per-file rules for one source, then the signatures of the surviving files."""
    if spec.archive is None and spec.stdlib_root is None and spec.error:
        return SourceScan(spec, Licence("unknown", False, "none"))
    if spec.archive is None:
        scan = SourceScan(spec, Licence(STDLIB_LICENCE, True, "fixed"))
        train, _ = corpus.split(spec.stdlib_root)
        files = ((f.name, len(f.text.encode("utf-8")), f.text.encode("utf-8")) for f in train)
        _scan_files(files, scan, lambda path: False)
    else:
        wheel = spec.archive.name.endswith(".whl")
        scan = SourceScan(spec, Licence("unknown", False, "none"))
        members = iter_members(spec.archive, _wanted(wheel))
        metadata = _scan_files(members, scan, lambda path: is_metadata_file(path, wheel))
        if metadata is not None:
            scan.licence = licence_of(parse_metadata(metadata))
        if not scan.licence.permissive:
            # Every file of the distribution counts as dropped for the licence, whatever else.
            for kind in KINDS:
                files = sum(scan.dropped[kind].values()) + sum(c.kind == kind for c in scan.candidates)
                scan.dropped[kind] = Counter({"licence": files} if files else {})
            scan.candidates = []
    for candidate in scan.candidates:
        candidate.signature = signature(candidate.text)
    scan.candidates.sort(key=lambda c: (c.kind, c.path))
    return scan


def source_specs(
    pins: list[Pin], dists: Path, skip_download: bool, stdlib_root: Path | None, log: Callable[[str], None]
) -> list[SourceSpec]:
    """The stdlib first, then each pin with its archive (downloaded unless `skip_download`)."""
    specs = [SourceSpec(STDLIB_SOURCE, STDLIB_VERSION, stdlib_root=stdlib_root or corpus.stdlib_root())]
    for pin in pins:
        try:
            archive = find_archive(dists, pin) if skip_download else download(pin, dists, log)
            error = None if archive is not None else "archive missing and --skip-download given"
        except RuntimeError as exc:
            archive, error = None, str(exc)
        if error:
            log(f"  {pin.name}: {error}")
        specs.append(SourceSpec(pin.name, pin.version, archive=archive, error=error))
    return specs


def _keep(
    scan: SourceScan, dedupers: dict[str, Deduplicator], counter: TokenCounter, cache_dir: Path
) -> dict:
    """Deduplicate one scanned source against everything kept before it, write its documents
    and count their tokens; returns its manifest entry."""
    kept = {kind: 0 for kind in KINDS}
    tokens = {kind: 0 for kind in KINDS}
    dropped = scan.dropped
    if scan.spec.error:
        dropped["python"]["download_failed"] += 1
    for kind in KINDS:
        rows, changelog_chars = [], 0
        for candidate in (c for c in scan.candidates if c.kind == kind):
            assert candidate.signature is not None
            changelog = kind == "prose" and is_changelog(candidate.path)
            if changelog and changelog_chars + len(candidate.text) > CHANGELOG_BUDGET_CHARS:
                dropped[kind]["changelog_budget"] += 1
                continue
            rule = dedupers[kind].check(f"{scan.spec.name}:{candidate.path}", candidate.signature)
            if rule:
                dropped[kind][rule] += 1
                continue
            rows.append((candidate.path, candidate.text))
            changelog_chars += len(candidate.text) if changelog else 0
        kept[kind] = write_documents(documents_path(cache_dir, kind, scan.spec.name), rows)
        tokens[kind] = counter.count([text for _, text in rows])
    spec = scan.spec
    archive = spec.archive.name if spec.archive else None
    return source_entry(spec.name, spec.version, archive, scan.licence, spec.error, kept, dropped, tokens)


def build(
    cache_dir: Path,
    only: set[str] | None = None,
    skip_download: bool = False,
    lock_path: Path = LOCK_FILE,
    stdlib_root: Path | None = None,
    manifest_path: Path | None = MANIFEST_PATH,
    workers: int = 2,
    tokenizer_path: Path = TOKENIZER_PATH,
    log: Callable[[str], None] = print,
) -> dict:
    """Build the corpus into `cache_dir` and return the manifest (see the module docstring).

    With `only`, just the named sources are scanned and written, deduplicated among themselves,
    and the repository's manifest is left alone (it describes full builds only).
    """
    started = time.monotonic()
    pins = read_lock(lock_path)
    wanted = None if only is None else {canonicalize_name(n) for n in only}
    if wanted is not None:
        known = {canonicalize_name(p.name) for p in pins} | {STDLIB_SOURCE}
        if wanted - known:
            raise ValueError(f"not in the lock file: {', '.join(sorted(wanted - known))}")
        pins = [p for p in pins if canonicalize_name(p.name) in wanted]
    specs = source_specs(pins, cache_dir / "dists", skip_download, stdlib_root, log)
    if wanted is not None and STDLIB_SOURCE not in wanted:
        specs = specs[1:]
    entries = []
    # Workers are forked before the tokenizer is loaded (its thread pool does not survive a fork).
    context = multiprocessing.get_context("fork")
    with context.Pool(workers) if workers > 1 else _InlinePool() as pool:
        results = pool.imap(scan_source, specs)
        dedupers = {kind: Deduplicator() for kind in KINDS}
        for held in corpus.split(stdlib_root)[1]:  # held-out modules: references, never written
            dedupers["python"].add(HELD_OUT_PREFIX + held.name, signature(held.text))
        counter = TokenCounter(tokenizer_path)
        for scan in results:
            entry = _keep(scan, dedupers, counter, cache_dir)
            entries.append(entry)
            log(
                f"  {scan.spec.name:<16} {scan.licence.name[:40]:<40} "
                f"python {entry['kept_python']:>6} files {entry['python_tokens']:>11,} tokens | "
                f"prose {entry['kept_prose']:>5} files {entry['prose_tokens']:>10,} tokens"
            )
    if wanted is None:
        _remove_stale(cache_dir, {e["name"] for e in entries})
    manifest = make_manifest(entries, counter)
    manifest["build_seconds"] = round(time.monotonic() - started)
    write_atomic(cache_dir / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")
    if wanted is None and manifest_path is not None:
        committed = {k: v for k, v in manifest.items() if k != "build_seconds"}
        write_atomic(manifest_path, json.dumps(committed, indent=2) + "\n")
    return manifest


class _InlinePool:
    """The Pool interface in this process (one worker: no fork, easier to debug and to test)."""

    def __enter__(self) -> "_InlinePool":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def imap(self, function: Callable, items: Iterable) -> Iterable:
        return map(function, items)


def _remove_stale(cache_dir: Path, names: set[str]) -> None:
    """Delete document files of sources that are no longer in the lock file."""
    for kind in KINDS:
        folder = cache_dir / "documents" / kind
        for path in folder.glob("*.jsonl") if folder.is_dir() else []:
            if path.stem not in names:
                path.unlink()


def _inside_repository(path: Path) -> bool:
    if not (REPO_ROOT / ".git").exists():
        return False
    return path.resolve().is_relative_to(REPO_ROOT)


def main(argv: list[str] | None = None) -> int:
    """Parse `build` options, build, print the totals against the targets; 1 when they are missed."""
    parser = argparse.ArgumentParser(
        prog="python -m dg_engine.train.corpus build", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--cache", type=Path, default=None,
        help=f"cache folder (default: $DG_LSP_CORPUS or {default_cache_dir()})",
    )
    parser.add_argument(
        "--only", default=None, help="comma-separated sources to (re)build, e.g. numpy,cpython-stdlib"
    )
    parser.add_argument(
        "--skip-download", action="store_true", help="use only archives already in CACHE/dists"
    )
    parser.add_argument("--workers", type=int, default=2, help="scanning processes (default 2)")
    args = parser.parse_args(argv)
    cache = (args.cache or default_cache_dir()).expanduser()
    if _inside_repository(cache):
        parser.error(f"the cache must be outside the repository ({REPO_ROOT}), not {cache}")
    only = None if args.only is None else {n.strip() for n in args.only.split(",") if n.strip()}
    print(f"building the corpus into {cache}")
    manifest = build(cache, only=only, skip_download=args.skip_download, workers=args.workers)
    print(f"dropped files by rule: {json.dumps(manifest['dropped'])}")
    for key, target in TARGETS.items():
        mark = "ok" if manifest[key] >= target else "SHORT"
        print(f"{key}: {manifest[key]:,} (target {target:,}) {mark}")
    print(f"built in {manifest['build_seconds']} s; manifest: {cache / MANIFEST_NAME}")
    if only is not None:
        print("partial build (--only): the targets apply to full builds; the committed manifest is unchanged")
        return 0
    return 0 if manifest["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
