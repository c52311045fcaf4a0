"""Typed server settings, merged from the editor, the user's config file and workspace files.

Settings arrive as loose JSON (initializationOptions, workspace/didChangeConfiguration) or TOML,
in camelCase, snake_case or nested (`{"confidence": {"threshold": 0.3}}`). They are flattened,
validated field by field, and every invalid value is replaced by the previous (or default) value
with a message for the user. Keys that choose what code runs (the model path, device, dtype,
quantization, threads) or where document text is sent (the backend, the remote server's URL and
the name of the variable that holds its API key) are accepted only from the user's own
configuration, never from a file in a workspace folder, so that opening a repository can neither
make the server load arbitrary weights nor send code and a key to a server of its choosing.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from dg_engine import EngineConfig

ALL_LANGUAGES = (
    "python", "javascript", "javascriptreact", "typescript", "typescriptreact",
    "rust", "go", "c", "cpp", "java", "markdown",
)
# What code runs, and where the code of open documents is sent (the remote backend's server, and
# which environment variable's secret goes with it), is the user's choice alone.
RESTRICTED = frozenset({"model", "device", "dtype", "quantization", "threads", "engine", "base_url", "api_key_env",
                        "adapter"})
CONFIDENCE_DISPLAYS = ("diagnostics", "inlayHints", "both", "off")


@dataclass(frozen=True)
class Settings:
    engine: EngineConfig = field(default_factory=EngineConfig)
    candidates: int = 1
    context_budget: int = 2048
    cross_file_context: bool = True
    languages: tuple[str, ...] = ALL_LANGUAGES
    hole_markers: tuple[str, ...] = ("TODO(dg)",)
    inline_enabled: bool = True
    inline_valid_only: bool = False
    # Ghost text keeps up with typing: a syntax-repair round starts only when it can end within
    # this many milliseconds of the request (0: ghost text is never repaired).
    inline_repair_budget_ms: int = 250
    drafts: bool = False
    confidence_threshold: float = 0.3
    confidence_display: str = "diagnostics"
    max_canvases: int = 4
    syntax_repair: bool = True
    repair_rounds: int = 2
    variable_length: bool = True
    joint_holes: bool = True
    # Next-edit suggestions: computed after the user pauses this long, shown above this confidence.
    next_edit_enabled: bool = True
    next_edit_debounce_ms: int = 300
    next_edit_min_confidence: float = 0.5
    # Only the edits the latest edit implies (`implied.py`), judged by the model; off adds the
    # model's own changes to the window, for a model strong enough that they are worth a look.
    next_edit_only_implied: bool = True

    def update(self, values: Mapping[str, Any], trusted: bool = True) -> tuple["Settings", list[str]]:
        """A copy with `values` applied; returns it and one message per rejected value."""
        flat = {_snake(k): v for k, v in _flatten(values).items()}
        messages: list[str] = []
        engine_values = {k: v for k, v in flat.items() if k in {f.name for f in dataclasses.fields(EngineConfig)}}
        if not trusted:
            for key in sorted(RESTRICTED & engine_values.keys()):
                messages.append(f"'{key}' can only be set in your user settings, not by a workspace; ignored")
                engine_values.pop(key)
        base = dataclasses.asdict(self.engine)
        engine, problems = EngineConfig.from_mapping({**base, **engine_values})
        messages += problems
        changes: dict[str, Any] = {"engine": engine}
        for f in dataclasses.fields(self):
            if f.name == "engine" or f.name not in flat:
                continue
            ok, value = _check(f.name, flat[f.name], getattr(self, f.name))
            if ok:
                changes[f.name] = value
            else:
                messages.append(f"invalid value {flat[f.name]!r} for '{f.name}'; keeping {getattr(self, f.name)!r}")
        return dataclasses.replace(self, **changes), messages


def _flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (values or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name not in ("dgLsp", "dg_lsp", "dg-lsp"):
            out.update(_flatten(value, name + "."))
        elif isinstance(value, Mapping):
            out.update(_flatten(value, ""))
        else:
            out[name] = value
    return out


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower().replace(".", "_").replace("-", "_")


def _check(name: str, value: Any, current: Any) -> tuple[bool, Any]:
    if name == "confidence_display":
        return value in CONFIDENCE_DISPLAYS, value
    if name in ("confidence_threshold", "next_edit_min_confidence"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0
        return ok, float(value) if ok else value
    if name == "candidates":
        return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 8, value
    if name in ("languages", "hole_markers"):
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value)
        return ok, tuple(value) if ok else value
    if isinstance(current, bool):
        return isinstance(value, bool), value
    if name == "repair_rounds":
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 8, value
    if name == "inline_repair_budget_ms":
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 60000, value
    if isinstance(current, int):
        return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65536, value
    return False, value
