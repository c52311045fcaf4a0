"""HumanEval-Infilling cases for the quality benchmark, and a sandboxed pass@1 executor.

The quality benchmark needs two things from HumanEval-Infilling (Bavarian et al., 2022) that the
rest of the code base has no reason to know about: where the data lives (a shared directory beside
the repository, not a package) and how to run a generated program safely. Both live here so that
`quality.py` only sees `Case`s and a `run_program` that answers passed / failed / timeout.

The data is for measurement only; nothing in the training code reads it.

How a case becomes an editor document: for the single-line and multi-line sets the removed middle
is one or more whole lines ending in a newline. An editor user asking for those lines sits on an
empty line, so the document is `prompt + "\\n" + suffix` with the cursor on that empty line and the
expected fill is the middle without its last newline; the program text after filling is exactly
`prompt + middle + suffix`. (This is also the shape of the `whole_line` / `multi_line` holes the
model was trained on.) Random-span middles are arbitrary character ranges and stay as they are.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FALLBACK_DATA = Path("/work/shared/data/human-eval-infilling")
SETS = {
    "he_single_line": "HumanEval-SingleLineInfilling.jsonl.gz",
    "he_multi_line": "HumanEval-MultiLineInfilling.jsonl.gz",
    "he_random_span": "HumanEval-RandomSpanInfilling.jsonl.gz",
}
LINE_SETS = {"he_single_line", "he_multi_line"}


@dataclass(frozen=True)
class Case:
    """One hole in one document, with what belongs in it.

    `text` is the document as the editor holds it (the hole removed), `offset` the cursor, `middle`
    the expected fill. `test` is the code that checks the filled program (HumanEval only).
    """

    set: str
    id: str
    kind: str
    text: str
    offset: int
    middle: str
    test: str | None = None

    @property
    def original(self) -> str:
        """The document with the expected middle in place."""
        return self.filled(self.middle)

    def filled(self, fill: str) -> str:
        return self.text[: self.offset] + fill + self.text[self.offset :]


def data_dir() -> Path | None:
    """`<repo>/../shared/data/human-eval-infilling` (CI layout), else the workstation path."""
    for candidate in (REPO.parent / "shared" / "data" / "human-eval-infilling", FALLBACK_DATA):
        if all((candidate / name).is_file() for name in SETS.values()):
            return candidate
    return None


def _case(name: str, row: dict) -> Case:
    prompt, suffix, middle = row["prompt"], row["suffix"], row["canonical_solution"]
    if name in LINE_SETS and middle.endswith("\n"):
        middle, suffix = middle[:-1], "\n" + suffix
    test = f"{row['test']}\n\ncheck({row['entry_point']})\n"
    kind = name.removeprefix("he_")
    return Case(name, row["task_id"], kind, prompt + suffix, len(prompt), middle, test)


def load_cases(name: str, limit: int | None, seed: int = 0, directory: Path | None = None) -> list[Case]:
    """Cases of one set; with a limit, a seeded sample spread over the file (kept in file order).

    The files are ordered by task, so taking the first N would measure only a few tasks.
    """
    directory = directory or data_dir()
    if directory is None:
        raise FileNotFoundError("HumanEval-Infilling data not found")
    with gzip.open(directory / SETS[name], "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    if limit is not None and limit < len(rows):
        picked = sorted(random.Random(f"{seed}:{name}").sample(range(len(rows)), limit))
        rows = [rows[i] for i in picked]
    return [_case(name, row) for row in rows]


# The sandbox. Loaded before the program: no sockets (so no network even where a proxy would
# allow it), and a memory ceiling so that a runaway fill cannot take the machine down.
GUARD = '''
import socket as _socket_module, _socket

def _blocked(*args, **kwargs):
    raise OSError("network access is disabled in the benchmark sandbox")

class _BlockedSocket:
    def __init__(self, *args, **kwargs):
        _blocked()

for _name in ("create_connection", "create_server", "getaddrinfo", "socketpair", "fromfd"):
    setattr(_socket_module, _name, _blocked)
_socket_module.socket = _BlockedSocket
_socket.socket = _BlockedSocket
'''

BOOTSTRAP = (
    "import sys, runpy; sys.path.insert(0, '.');"
    "exec(compile(open('sitecustomize.py').read(), 'sitecustomize.py', 'exec'), {});"
    "sys.path.pop(0); sys.argv = ['program.py'];"
    "runpy.run_path('program.py', run_name='__main__')"
)
MEMORY_LIMIT_BYTES = 2 << 30
CPU_LIMIT_SECONDS = 60  # a backstop; the wall-clock timeout normally ends a program first
_PROXY_VARIABLES = {"http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy"}


def _limits() -> None:
    """Runs in the child before exec: cap memory (address space), CPU seconds and core files."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_SECONDS, CPU_LIMIT_SECONDS))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _clean_environment() -> dict[str, str]:
    keep = {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "SYSTEMROOT"}
    env = {k: v for k, v in os.environ.items() if k in keep and k.lower() not in _PROXY_VARIABLES}
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@dataclass(frozen=True)
class Outcome:
    """What running one program did: `status` is passed, failed or timeout."""

    status: str
    seconds: float
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def run_program(source: str, timeout: float = 5.0, python: str | None = None) -> Outcome:
    """Run a program in a fresh isolated interpreter in a temporary directory.

    `python -I` ignores PYTHON* variables, the user's site-packages and the script's directory; the
    environment has no proxy variables; the guard above is executed first and disables sockets.
    The whole process group is killed on timeout. Exit status 0 is a pass, anything else a failure.
    """
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dg-quality-") as tmp:
        Path(tmp, "sitecustomize.py").write_text(GUARD)
        Path(tmp, "program.py").write_text(source, encoding="utf-8", errors="surrogatepass")
        proc = subprocess.Popen(
            [python or sys.executable, "-I", "-c", BOOTSTRAP],
            cwd=tmp,
            env=_clean_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_limits,
        )
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Outcome("timeout", time.perf_counter() - started)
    seconds = time.perf_counter() - started
    if proc.returncode == 0:
        return Outcome("passed", seconds)
    lines = err.decode("utf-8", "replace").strip().splitlines()
    return Outcome("failed", seconds, lines[-1][:200] if lines else f"exit {proc.returncode}")


class Executor:
    """Runs programs for pass@1 with a cache, since many systems produce the same program."""

    def __init__(self, timeout: float = 5.0, workers: int = 2):
        self.timeout = timeout
        self.workers = workers
        self._cache: dict[str, Outcome] = {}

    def run_many(self, programs: list[str]) -> list[Outcome]:
        from concurrent.futures import ThreadPoolExecutor

        keys = [hashlib.sha256(p.encode("utf-8", "surrogatepass")).hexdigest() for p in programs]
        todo = {k: p for k, p in zip(keys, programs) if k not in self._cache}
        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            for key, outcome in zip(todo, pool.map(lambda p: run_program(p, self.timeout), todo.values())):
                self._cache[key] = outcome
        return [self._cache[k] for k in keys]
