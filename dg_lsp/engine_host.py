"""Owns the engine's life: loading in the background, hot reload, state and latencies.

`initialize` must answer at once, so the model loads on a thread of its own while the server
already serves (features answer empty until it is ready). A failed load leaves a clear message
and, on a reload, keeps the old model serving. The host also keeps what `dg.status` reports.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from statistics import median
from typing import Callable

from dg_engine import Engine, EngineConfig, EngineError, load_engine

log = logging.getLogger(__name__)

StateListener = Callable[[str, str], None]  # (state, message)


@dataclass
class Latencies:
    samples: dict[str, deque] = field(default_factory=dict)

    def record(self, feature: str, ms: float) -> None:
        self.samples.setdefault(feature, deque(maxlen=50)).append(ms)

    def last(self) -> float | None:
        latest = [(d[-1]) for d in self.samples.values() if d]
        return latest[-1] if latest else None

    def summary(self) -> dict:
        return {k: {"last": round(d[-1], 1), "median": round(median(d), 1), "count": len(d)} for k, d in self.samples.items() if d}


class EngineHost:
    def __init__(self, loader: Callable[[EngineConfig], Engine] = load_engine):
        self._loader = loader
        self._lock = threading.Lock()
        self.engine: Engine | None = None
        self.config: EngineConfig | None = None
        self.state = "idle"
        self.message = ""
        self.latencies = Latencies()
        self.listeners: list[StateListener] = []
        self._thread: threading.Thread | None = None

    def _set(self, state: str, message: str) -> None:
        self.state, self.message = state, message
        for listener in self.listeners:
            try:
                listener(state, message)
            except Exception:
                log.exception("status listener failed")

    def load(self, config: EngineConfig, wait: bool = False, force: bool = False) -> None:
        """Load `config` in the background; the current engine keeps serving until it is ready.

        `force` reloads even when nothing in the configuration changed (a new adapter on disk)."""
        if not force and self.config is not None and config.load_key() == self.config.load_key() and self.engine is not None:
            self.config = config  # Sampling options apply per request; no reload needed.
            return
        # Logged with its cause, so a log shows why the model was loaded again (a load costs seconds).
        log.info("loading model %r on %s (%s)", config.model, config.device,
                 "forced" if force else "first load" if self.engine is None else "settings changed")
        self.config = config
        self._set("loading", f"loading model '{config.model}'")
        self._thread = threading.Thread(target=self._load, args=(config,), name="dg-load", daemon=True)
        self._thread.start()
        if wait:
            self._thread.join()

    def _load(self, config: EngineConfig) -> None:
        started = time.perf_counter()
        try:
            engine = self._loader(config)
        except EngineError as exc:
            self._fail(config, str(exc))
            return
        except Exception as exc:  # Anything else is a bug, but it must not take the server down.
            log.exception("unexpected error while loading the model")
            self._fail(config, f"unexpected error while loading the model: {exc!r}")
            return
        with self._lock:
            if self.config.load_key() != config.load_key():
                return  # A newer configuration was requested while this one loaded.
            self.engine = engine
        info = engine.info()
        if info.get("health") in ("unreachable", "failing"):
            # A remote engine whose server is down is usable (each request tries again), but
            # "loaded" would be a lie; say what is wrong instead.
            self._set("ready", f"{info['model']} at {info['device']}: {info['health']} ({info.get('healthMessage', '')}); "
                               "each request will try again")
            return
        self._set("ready", f"{info['model']} on {info['device']} loaded in {time.perf_counter() - started:.1f} s")

    def _fail(self, config: EngineConfig, reason: str) -> None:
        if self.engine is not None:
            self._set("ready", f"could not load '{config.model}' ({reason}); still serving '{self.engine.source}'")
            self.error = reason
        else:
            self._set("error", reason)

    def wait(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.engine is not None

    def status(self) -> dict:
        info = self.engine.info() if self.engine is not None else {}
        return {
            "state": self.state,
            "message": self.message,
            **info,
            "lastLatencyMs": self.latencies.summary(),
        }
