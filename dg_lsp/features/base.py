"""The shape of a model-backed feature: prepare on the loop, compute on the worker, finish on the loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable


@dataclass(frozen=True)
class Ready:
    """Returned by `prepare` when the answer is known without the model (cache, typed-ahead, empty)."""

    value: Any


@dataclass(frozen=True)
class WorkerFeature:
    prepare: Callable[..., Any]  # (server, params) -> job | Ready, on the event loop
    compute: Callable[[Any, Any, Any], Any]  # (server, job, token) -> result, on the worker
    finish: Callable[[Any, Any, Any], Any]  # async (server, job, result) -> response, on the loop
    key: Callable[[Any], Hashable] | None = None  # LATEST only: which requests supersede each other
