"""Fault injection for the reliability tests, present only when DG_LSP_TEST_FAULTS=1.

The `dg.test.*` commands make the server fail where a user's machine might (an exception on the
loop or the worker, an out-of-memory error in the next fill), or control the garbage collector for
the memory tests; `DG_LSP_TEST_LOAD_DELAY_S` makes the model load that many seconds slower.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

TEST_FAULTS_ENV = "DG_LSP_TEST_FAULTS"


def install_test_faults(server) -> bool:
    """Register the `dg.test.*` commands when DG_LSP_TEST_FAULTS=1; returns whether it did."""
    if os.environ.get(TEST_FAULTS_ENV) != "1":
        return False
    log.warning("%s=1: test-fault commands are enabled", TEST_FAULTS_ENV)

    delay = float(os.environ.get("DG_LSP_TEST_LOAD_DELAY_S", "0") or 0)
    if delay > 0:
        # A model that takes its time to load, to see what the editor is told meanwhile.
        load = server.host._loader

        def slow_load(config):
            import time

            time.sleep(delay)
            return load(config)

        server.host._loader = slow_load

    @server.command("dg.test.raise")
    async def raise_(*args):
        where = args[0].get("where", "loop") if args and isinstance(args[0], dict) else "loop"
        if where == "worker":
            def job(token):
                raise RuntimeError("fault injected on the compute worker by dg.test.raise")

            return await server.scheduler.run(job)
        raise RuntimeError("fault injected on the event loop by dg.test.raise")

    @server.command("dg.test.oomNextFill")
    def oom_next_fill(*args):
        megabytes = args[0].get("megabytes", 0) if args and isinstance(args[0], dict) else 0
        engine = server.host.engine
        if engine is None:
            return {"armed": False}

        def failing(*a, **k):
            import torch

            del engine._fill  # Only this one call fails; the class's method serves the next.
            ballast = torch.ones(int(megabytes) * 2**20, dtype=torch.uint8) if megabytes else None
            raise torch.OutOfMemoryError(
                f"injected by dg.test.oomNextFill after allocating {0 if ballast is None else ballast.numel()} bytes")

        engine._fill = failing
        return {"armed": True}

    @server.command("dg.test.gc")
    def gc_control(*args):
        import gc

        options = args[0] if args and isinstance(args[0], dict) else {}
        if "enabled" in options:
            gc.enable() if options["enabled"] else gc.disable()
        collected = gc.collect() if options.get("collect") else 0
        trimmed = False
        if options.get("trim"):
            try:
                import ctypes

                trimmed = bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
            except (OSError, AttributeError):
                pass  # not glibc
        return {"enabled": gc.isenabled(), "collected": collected, "trimmed": trimmed}

    return True
