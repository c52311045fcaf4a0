"""How the server process ends: on `exit`, when stdin closes, and when the editor's process dies.

A language server must not outlive its editor: an orphaned server would keep the model (hundreds
of megabytes, maybe a GPU) until someone notices. Three things end the process:

* the `exit` notification: code 0 after `shutdown`, 1 without (the LSP rule);
* end of input on stdin: the editor closed the pipe or died; code 0 after `shutdown`, 1 without;
* the death of the process whose id the editor passed as `processId` in `initialize`; code 0.

Each ends the process at once with `os._exit`, after flushing stdout and stderr. A normal
interpreter exit would first join the compute worker, which may be in the middle of a long model
call, and pygls' reader threads, which may be blocked reading stdin; the operating system frees
the model's memory either way.

The editor's process is watched with a pidfd (Linux 5.3+), which becomes readable the moment the
process ends, zombie or not, and cannot be confused by the pid being reused; elsewhere it is
polled. A `processId` that does not exist when `initialize` arrives (an editor in another pid
namespace, e.g. outside a container) is not watched: it cannot die for us, and exiting at once
would make such setups unusable.
"""

from __future__ import annotations

import logging
import os
import select
import sys
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.25


def exit_process(code: int) -> None:
    """End the process now, without joining threads; output already written is flushed first."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # A closed or broken stream cannot stop the exit.
            pass
    os._exit(code)


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (ended, not yet reaped by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # It exists but belongs to someone else.
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # The state follows the command name, which is in parentheses and may contain spaces.
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] != b"Z"
    except (OSError, ValueError):
        return True  # No /proc (not Linux): kill(0) is all we can know.


def watch_parent(pid: int | None, on_gone: Callable[[], None] | None = None) -> threading.Thread | None:
    """Call `on_gone` (default: exit with code 0) when process `pid` ends; returns the watcher."""
    if not pid or pid == os.getpid():
        return None
    if not alive(pid):
        log.warning("the editor's process id %s does not exist here; not watching it", pid)
        return None
    on_gone = on_gone or _parent_gone(pid)
    pidfd = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = None

    def watch() -> None:
        if pidfd is not None:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            while not poller.poll(1000) and alive(pid):
                pass
            os.close(pidfd)
        else:
            while alive(pid):
                time.sleep(POLL_INTERVAL_S)
        on_gone()

    thread = threading.Thread(target=watch, name="dg-parent-watch", daemon=True)
    thread.start()
    return thread


def _parent_gone(pid: int) -> Callable[[], None]:
    def gone() -> None:
        log.info("the editor (pid %s) is gone; exiting", pid)
        exit_process(0)

    return gone
