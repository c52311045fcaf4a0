"""Typed engine options, with validation that falls back to defaults instead of failing.

Options come from a command line, an editor's settings or a config file, so they are often
slightly wrong. `EngineConfig.from_mapping` keeps every valid value, replaces every invalid one by
its default and reports each replacement as a message the caller shows to the user.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZATIONS = ("none", "int8", "fp8", "nf4")


@dataclass(frozen=True)
class EngineConfig:
    """Everything that decides which model runs where and how it samples.

    Zero for `canvas_length`, `max_steps` and `entropy_bound` means "the model's own default"
    (from its config.json and generation_config.json).
    """

    model: str = "embedded"
    device: str = "auto"
    dtype: str = "auto"
    quantization: str = "none"
    canvas_length: int = 0
    max_steps: int = 0
    entropy_bound: float = 0.0
    threads: int = 0

    def torch_threads(self, cpu_count: int | None = None) -> int:
        """The intra-op thread count to run with; `threads = 0` picks one from the core count.

        The automatic choice leaves one core to the language server's event loop, tree-sitter and
        the editor itself, and stops at four: a model this small gains little from more threads,
        and on a loaded 2-core machine one thread answered as fast as two.
        """
        if self.threads > 0:
            return self.threads
        cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
        return max(1, min(4, cores - 1))

    def load_key(self) -> tuple:
        """The options that need the model to be loaded again when they change."""
        return (self.model, self.device, self.dtype, self.quantization, self.threads)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> tuple["EngineConfig", list[str]]:
        """Build a config from loose values; returns it and one message per rejected value."""
        problems: list[str] = []
        defaults = cls()
        accepted: dict[str, Any] = {}
        names = {f.name: f for f in dataclasses.fields(cls)}
        for key, value in values.items():
            if key not in names:
                continue
            default = getattr(defaults, key)
            ok, coerced = _coerce(key, value, default)
            if ok:
                accepted[key] = coerced
            else:
                problems.append(f"invalid value {value!r} for '{key}'; using {default!r}")
        return cls(**accepted), problems


def _coerce(key: str, value: Any, default: Any) -> tuple[bool, Any]:
    choices = {"device": DEVICES, "dtype": DTYPES, "quantization": QUANTIZATIONS}.get(key)
    if choices is not None:
        return (value in choices, value)
    if isinstance(default, bool):
        return (isinstance(value, bool), value)
    if isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 4096
        return (ok, value)
    if isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 100
        return (ok, float(value) if ok else value)
    if isinstance(default, str):
        return (isinstance(value, str) and bool(value.strip()), value)
    return (False, value)


@dataclass(frozen=True)
class SamplingOptions:
    """Per-request sampling settings, resolved against the model's generation defaults."""

    canvas_length: int
    max_steps: int
    entropy_bound: float
    t_min: float
    t_max: float
    stability_threshold: int
    confidence_threshold: float
    extra: dict = field(default_factory=dict)
