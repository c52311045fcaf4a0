"""Downloading the pinned distributions' archives and reading them without unpacking.

The corpus is built from the archives PyPI publishes (sdists; a wheel where there is no sdist),
never from an installed copy: an installed package is whatever version some other tool resolved,
carries compiled files instead of sources and lacks the documentation, while an archive pinned in
`distributions.lock` is the same bytes on every machine. pip does the downloading, so the index,
certificates and local wheel folders configured for pip are honoured; `pkginfo_backend.py`
explains why pip is stopped from building sdists on the way. Archives are read member by member
with `tarfile` / `zipfile`, straight from `CACHE/dists/`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from email.message import Message
from email.parser import Parser
from pathlib import Path
from typing import Callable, Iterator

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

LOCK_FILE = Path(__file__).with_name("distributions.lock")
SDIST_SUFFIXES = (".tar.gz", ".zip")


@dataclass(frozen=True)
class Pin:
    """One line of the lock file: a distribution, its exact version, and which archive to read."""

    name: str
    version: str
    wheel: bool = False

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


def parse_lock(text: str) -> list[Pin]:
    """`name==version [wheel]` lines, `#` comments and blank lines ignored; order is kept."""
    pins = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(?:\s+(wheel))?", line)
        if not match:
            raise ValueError(f"lock line {number}: expected 'name==version [wheel]', got {raw!r}")
        pins.append(Pin(match[1], match[2], match[3] == "wheel"))
    names = [canonicalize_name(p.name) for p in pins]
    if len(set(names)) != len(names):
        raise ValueError("a distribution is pinned twice")
    return pins


def read_lock(path: Path = LOCK_FILE) -> list[Pin]:
    return parse_lock(path.read_text(encoding="utf-8"))


def _same_version(a: str, b: str) -> bool:
    """`2.13.0+cpu` is the local build of `2.13.0`, as pip's `==2.13.0` matches it."""
    try:
        return Version(a).public == Version(b).public
    except InvalidVersion:
        return a == b


def archive_matches(filename: str, pin: Pin) -> bool:
    """Whether a file in `dists/` is the archive of this pin (the right kind, name and version)."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
            ok_kind = pin.wheel
        elif filename.endswith(SDIST_SUFFIXES):
            name, version = parse_sdist_filename(filename)
            ok_kind = not pin.wheel
        else:
            return False
    except ValueError:
        return False
    return ok_kind and name == canonicalize_name(pin.name) and _same_version(str(version), pin.version)


def find_archive(dists: Path, pin: Pin) -> Path | None:
    """The pin's archive already downloaded into `dists`, if any (first in sorted order)."""
    if not dists.is_dir():
        return None
    for path in sorted(dists.iterdir()):
        if path.is_file() and archive_matches(path.name, pin):
            return path
    return None


def pip_download_command(pin: Pin, dest: Path) -> list[str]:
    """The `pip download` call for one pin: no dependencies, exactly one kind of archive."""
    kind = ["--only-binary", ":all:"] if pin.wheel else ["--no-binary", ":all:", "--no-build-isolation"]
    return [sys.executable, "-m", "pip", "download", "--no-deps", *kind, "-d", str(dest), pin.requirement]


def download(pin: Pin, dists: Path, log: Callable[[str], None] = print) -> Path:
    """The pin's archive in `dists`, downloaded with pip unless it is already there.

    pip writes into a temporary folder next to `dists` and the archive is renamed into place
    only once pip succeeded, so an interrupted download never passes for a complete one.
    """
    existing = find_archive(dists, pin)
    if existing is not None:
        return existing
    dists.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dists.parent, prefix=".download-") as tmp:
        staging, hooks = Path(tmp) / "out", Path(tmp) / "hooks"
        hooks.mkdir()
        shutil.copy(Path(__file__).with_name("pkginfo_backend.py"), hooks / "sitecustomize.py")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(hooks), env.get("PYTHONPATH", "")) if p)
        log(f"downloading {pin.requirement}{' (wheel)' if pin.wheel else ''}")
        result = subprocess.run(
            pip_download_command(pin, staging), env=env, capture_output=True, text=True, check=False
        )
        found = find_archive(staging, pin)
        if result.returncode != 0 or found is None:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"pip download {pin.requirement} failed: {' | '.join(tail)}")
        target = dists / found.name
        os.replace(found, target)
        return target


def _relative(name: str, sdist: bool) -> str | None:
    """A member's path inside the distribution: an sdist's top `name-version/` folder is dropped."""
    if not sdist:
        return name
    parts = name.split("/", 1)
    return parts[1] if len(parts) == 2 and parts[1] else None


def iter_members(
    archive: Path, wanted: Callable[[str, int], bool]
) -> Iterator[tuple[str, int, bytes | None]]:
    """(relative path, size, bytes or None) of each regular file, in the archive's own order.

    Paths are relative to the sdist's top folder (`numpy-2.4.6/numpy/x.py` -> `numpy/x.py`; every
    sdist has exactly one), a wheel's are already relative. The bytes are read only where
    `wanted(path, size)` says so. A tar.gz is read as a stream, in one decompression pass.
    """
    sdist = not archive.name.endswith(".whl")
    if archive.name.endswith(".tar.gz"):
        with tarfile.open(archive, "r|gz") as tar:
            for member in tar:
                path = _relative(member.name, sdist)
                if not member.isfile() or path is None:
                    continue
                data = None
                if wanted(path, member.size):
                    handle = tar.extractfile(member)
                    data = handle.read() if handle is not None else None
                yield path, member.size, data
    else:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                path = _relative(info.filename, sdist)
                if info.is_dir() or path is None:
                    continue
                data = zf.read(info) if wanted(path, info.file_size) else None
                yield path, info.file_size, data


def is_metadata_file(path: str, wheel: bool) -> bool:
    """Whether a member is the archive's core metadata: the sdist's top `PKG-INFO`, a wheel's `METADATA`."""
    if wheel:
        return re.fullmatch(r"[^/]+\.dist-info/METADATA", path) is not None
    return path == "PKG-INFO"


def parse_metadata(text: str) -> Message:
    """Core metadata (RFC 822 headers; the description body, if any, is ignored)."""
    return Parser().parsestr(text, headersonly=True)
