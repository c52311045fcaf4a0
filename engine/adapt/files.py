"""Which files of a workspace an adapter may learn from, and which it must never read.

Only files git tracks are candidates (`git ls-files`), minus those the ignore rules match (a file
force-added despite `.gitignore` is still one the user meant to keep out). Of those, a file is
skipped without being opened when its name says it holds secrets (`.env`, keys, certificates,
credential stores), when its extension is not one of the configured languages', or when it is
too large; a file that is opened and turns out to hold something token-like (a private key block,
a cloud or forge access token, `password = "..."` with a long literal) is dropped from the set.
Every skip is counted by reason, so the command can say what it left out and why.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..train.corpus import SourceFile

EXTENSIONS: dict[str, tuple[str, ...]] = {
    "python": (".py", ".pyi"),
    "javascript": (".js", ".mjs", ".cjs", ".jsx"),
    "javascriptreact": (".jsx",),
    "typescript": (".ts", ".mts", ".cts"),
    "typescriptreact": (".tsx",),
    "rust": (".rs",),
    "go": (".go",),
    "c": (".c", ".h"),
    "cpp": (".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx"),
    "java": (".java",),
    "markdown": (".md",),
}
MAX_FILE_BYTES = 200_000
MAX_TOTAL_BYTES = 50_000_000

# Names that hold secrets by convention; matched against the file name, lowercased.
SECRET_NAMES = re.compile(
    r"^(\.env(\..*)?|.*\.(pem|key|p12|pfx|jks|keystore|crt|cer|der|asc|gpg|kdbx)|id_(rsa|dsa|ecdsa|ed25519)(\.pub)?"
    r"|\.netrc|\.pypirc|\.npmrc|\.git-credentials|credentials(\..*)?|secrets?(\..*)?)$"
)
# Contents that look like a credential. Deliberately broad: a false alarm costs one file.
SECRET_TEXT = re.compile(
    r"-----BEGIN ([A-Z]+ )?PRIVATE KEY-----"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}\b"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\bsk-[A-Za-z0-9_-]{20,}"
    r"|\bAIza[0-9A-Za-z_-]{35}\b"
    r"|(?i:(api[_-]?key|secret|token|passw(or)?d)\s*[:=]\s*['\"][^'\"\s]{16,}['\"])"
)


class WorkspaceError(RuntimeError):
    """The folder cannot be adapted to (not a git repository, git missing)."""


@dataclass
class Selection:
    files: list[SourceFile]
    skipped: Counter = field(default_factory=Counter)

    @property
    def chars(self) -> int:
        return sum(len(f.text) for f in self.files)


def git_files(root: Path) -> tuple[list[str], int]:
    """Tracked files of the repository at `root` minus those its ignore rules match, and how many those were."""
    def ls(*extra: str) -> list[str]:
        try:
            out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", *extra], capture_output=True,
                                 check=True, timeout=60).stdout
        except FileNotFoundError:
            raise WorkspaceError("git is not installed; adapting reads only the files git tracks") from None
        except subprocess.CalledProcessError as exc:
            raise WorkspaceError(f"{root} is not a git repository ({exc.stderr.decode(errors='replace').strip()})") from None
        return [p for p in out.decode("utf-8", errors="surrogateescape").split("\0") if p]

    ignored = set(ls("--cached", "--ignored", "--exclude-standard"))
    return [p for p in ls("--cached") if p not in ignored], len(ignored)


def select(root: Path, languages: tuple[str, ...] = ("python",), max_file_bytes: int = MAX_FILE_BYTES,
           max_total_bytes: int = MAX_TOTAL_BYTES) -> Selection:
    """The files to learn from, in a stable order, with counts of what was left out and why."""
    root = Path(root).resolve()
    wanted = {ext for lang in languages for ext in EXTENSIONS.get(lang, ())}
    out, total = Selection([]), 0
    tracked, ignored = git_files(root)
    if ignored:
        out.skipped["ignored by .gitignore"] += ignored
    for rel in sorted(tracked):
        name = PurePosixPath(rel).name
        if SECRET_NAMES.match(name.lower()):
            out.skipped["secret-looking name"] += 1
            continue
        if PurePosixPath(rel).suffix.lower() not in wanted:
            out.skipped["other language"] += 1
            continue
        path = root / rel
        if path.is_symlink() or not path.is_file():
            out.skipped["not a regular file"] += 1
            continue
        size = path.stat().st_size
        if size > max_file_bytes:
            out.skipped["too large"] += 1
            continue
        if total + size > max_total_bytes:
            out.skipped["over the total size limit"] += 1
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            out.skipped["not UTF-8 text"] += 1
            continue
        if SECRET_TEXT.search(text):
            out.skipped["token-like content"] += 1
            continue
        if "\0" in text or not text.strip():
            out.skipped["empty or binary"] += 1
            continue
        out.files.append(SourceFile(rel, text))
        total += size
    return out
