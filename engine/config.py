"""Typed engine options, with validation that falls back to defaults instead of failing.

Options come from a command line, an editor's settings or a config file, so they are often
slightly wrong. `EngineConfig.from_mapping` keeps every valid value, replaces every invalid one by
its default and reports each replacement as a message the caller shows to the user.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

log = logging.getLogger(__name__)

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZATIONS = ("auto", "none", "int8", "fp8", "nf4")
BACKENDS = ("local", "remote")
PROMPT_FORMATS = ("auto", "fim", "pinned", "chat")


@dataclass(frozen=True)
class EngineConfig:
    """Everything that decides which model runs where and how it samples.

    Zero for `canvas_length`, `max_steps`, `entropy_bound` and `lead_beam` means "the model's own
    default" (from its config.json, generation_config.json and lead_config.json).

    `engine = "remote"` sends requests to an OpenAI-compatible server at `base_url` instead of
    loading a model; `model` is then the served model's name ("embedded" means the server's first
    model), the API key is read from the environment variable named by `api_key_env`, and
    `timeout` (seconds per request), `connect_timeout` and `retries` bound each request.
    """

    model: str = "embedded"
    device: str = "auto"
    dtype: str = "auto"
    quantization: str = "auto"
    canvas_length: int = 0
    max_steps: int = 0
    entropy_bound: float = 0.0
    threads: int = 0
    engine: str = "local"
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str = "DG_LSP_API_KEY"
    timeout: float = 30.0
    connect_timeout: float = 3.0
    retries: int = 1
    prompt_format: str = "auto"
    # An adapter directory (`dg-lsp adapt`) applied on top of the model; "" for none.
    adapter: str = ""
    # First lines a line lead weighs (`beam.py`); 0: the model's own choice (its LEAD_CONFIG).
    lead_beam: int = 0

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
        """The options that need the model to be loaded (or the server reached) again when they change."""
        local = (self.model, self.device, self.dtype, self.quantization, self.threads, self.engine, self.adapter,
                 self.prompt_format)
        if self.engine != "remote":
            return local
        return local + (self.base_url, self.api_key_env, self.timeout, self.connect_timeout, self.retries,
                        self.prompt_format)

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
    choices = {"device": DEVICES, "dtype": DTYPES, "quantization": QUANTIZATIONS, "engine": BACKENDS,
               "prompt_format": PROMPT_FORMATS}.get(key)
    if choices is not None:
        return (value in choices, value)
    if key == "base_url":
        ok = isinstance(value, str) and re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value.strip()) is not None
        return (ok, value.strip() if ok else value)
    if key == "adapter":
        return (isinstance(value, str), value.strip() if isinstance(value, str) else value)
    if key == "api_key_env":
        return (isinstance(value, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value) is not None, value)
    if key in ("timeout", "connect_timeout"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0.1 <= value <= 600
        return (ok, float(value) if ok else value)
    if key == "retries":
        return (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 5, value)
    if key == "lead_beam":
        return (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 16, value)
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
    # A rewrite re-noises the seed tokens whose likelihood falls below this. How sure a model is
    # of text it is shown depends on how well trained it is, so it is tuned per model
    # (`dg_engine.train.tune_rewrite`) and stored beside it in REWRITE_CONFIG.
    renoise_below: float = 0.2
    # Greedy tokens of the encoder's next-token head before a plain fill's canvas (`lead.py`);
    # tuned per model and stored beside it in LEAD_CONFIG.
    lead_tokens: int = 0
    # Whether the head writes the whole first line (at most `lead_tokens` tokens) rather than
    # exactly `lead_tokens` tokens; also from LEAD_CONFIG.
    lead_line: bool = False
    # Whether the head may finish the prefix's last token rather than start after it (`healing.py`).
    heal: bool = True
    # A line lead ends the middle once the head gives its stop tokens more than this probability,
    # not only when one of them is its likeliest token; 1.0: only then. Also from LEAD_CONFIG.
    lead_stop: float = 1.0
    # Hypotheses a line lead keeps (`beam.py`); 1: the greedy head. Also from LEAD_CONFIG.
    lead_beam: int = 1
    # How far the beam's line must score above the greedy one to replace it (`beam.py`); 0: the
    # beam's line always. Also from LEAD_CONFIG.
    lead_margin: float = 0.0
    extra: dict = field(default_factory=dict)


# dg-lsp's own files in a model directory: generation_config.json refuses keys transformers does
# not know.
REWRITE_CONFIG = "rewrite_config.json"
LEAD_CONFIG = "lead_config.json"


def sampling_defaults(model, config: EngineConfig) -> SamplingOptions:
    """The model's own sampler settings (its generation config, the library's defaults where it is
    silent) as `SamplingOptions`, with the canvas, step and entropy options the user configured."""
    gen = model.generation_config
    defaults = type(gen)._get_default_generation_params()

    def pick(name):
        value = getattr(gen, name, None)
        return defaults[name] if value is None else value

    sampler = pick("sampler_config")
    return SamplingOptions(
        canvas_length=config.canvas_length or model.config.canvas_length,
        max_steps=config.max_steps or pick("max_denoising_steps"),
        entropy_bound=config.entropy_bound or sampler.entropy_bound,
        t_min=pick("t_min"),
        t_max=pick("t_max"),
        stability_threshold=pick("stability_threshold"),
        confidence_threshold=pick("confidence_threshold"),
    )


def _tuned(model_dir: Path, name: str, key: str, valid, meaning: str, default):
    """`key` of the json file `name` in `model_dir` when `valid` accepts it; else `default`, with
    a message when the file is there but unusable."""
    path = Path(model_dir) / name
    if not path.is_file():
        return default
    try:
        value = json.loads(path.read_text())[key]
        if isinstance(value, bool) or not valid(value):
            raise ValueError(f"{key} must be {meaning}, not {value!r}")
        return value
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s is ignored (%s); %s = %s", path, exc, key, default)
        return default


def tuned_renoise_below(model_dir: Path) -> float:
    """The rewrite threshold tuned for the model in `model_dir`, or the default."""
    return float(_tuned(model_dir, REWRITE_CONFIG, "renoise_below",
                        lambda v: isinstance(v, (int, float)) and 0 < v < 1, "a number between 0 and 1",
                        SamplingOptions.renoise_below))


def tuned_lead_line(model_dir: Path) -> bool:
    """Whether the model's head writes a fill's whole first line, at most `lead_tokens` tokens
    (`lead.py`); False unless the model directory's LEAD_CONFIG says `"lead_line": true`."""
    path = Path(model_dir) / LEAD_CONFIG
    try:
        value = json.loads(path.read_text()).get("lead_line", False) if path.is_file() else False
    except (OSError, ValueError, AttributeError):
        return False  # an unreadable file: `tuned_lead_tokens` says so
    if not isinstance(value, bool):
        log.warning("%s: lead_line must be true or false, not %r; it is ignored", path, value)
        return False
    return value


def _optional_lead(model_dir: Path, key: str, valid, meaning: str, default):
    """`key` of LEAD_CONFIG, or `default` without a message where the file or the key is absent."""
    path = Path(model_dir) / LEAD_CONFIG
    try:
        if not path.is_file() or key not in json.loads(path.read_text()):
            return default
    except (OSError, ValueError, TypeError):
        return default  # an unreadable file: `tuned_lead_tokens` says so
    return _tuned(model_dir, LEAD_CONFIG, key, valid, meaning, default)


def tuned_lead_stop(model_dir: Path) -> float:
    """The stop probability above which the model's line lead ends the middle (`lead.py`)."""
    return float(_optional_lead(model_dir, "lead_stop", lambda v: isinstance(v, (int, float)) and 0 < v <= 1,
                                "a number above 0 and at most 1", SamplingOptions.lead_stop))


def tuned_lead_beam(model_dir: Path) -> int:
    """How many first lines the model's line lead weighs (`beam.py`); 1, the greedy head, unless
    the model directory's LEAD_CONFIG says `"lead_beam": N`."""
    return _optional_lead(model_dir, "lead_beam", lambda v: isinstance(v, int) and 1 <= v <= 16,
                          "a whole number from 1 to 16", SamplingOptions.lead_beam)


def tuned_lead_margin(model_dir: Path) -> float:
    """How far the beam's first line must score above the greedy line to be taken (`beam.py`); 0
    unless the model directory's LEAD_CONFIG says `"lead_margin": M`."""
    return float(_optional_lead(model_dir, "lead_margin", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                                and 0 <= v <= 10, "a number from 0 to 10", SamplingOptions.lead_margin))


def tuned_lead_tokens(model_dir: Path) -> int:
    """How many first tokens of a fill the model's next-token head writes (`lead.py`); 0 unless
    the model directory says otherwise."""
    return _tuned(model_dir, LEAD_CONFIG, "lead_tokens", lambda v: isinstance(v, int) and 0 <= v <= 64,
                  "a whole number from 0 to 64", SamplingOptions.lead_tokens)
