"""dg_engine: runs a DiffusionGemma model for fill-in-the-middle and rewrites.

It knows nothing about LSP, editors or tree-sitter: it takes plain text and options and returns
plain data. Hugging Face offline mode and passive OpenMP waiting are switched on here, before any
Hugging Face library or torch is imported; downloads stay off unless DG_LSP_ALLOW_DOWNLOAD=1.
"""

import os as _os

if _os.environ.get("DG_LSP_ALLOW_DOWNLOAD") != "1":
    _os.environ["HF_HUB_OFFLINE"] = "1"
    _os.environ["TRANSFORMERS_OFFLINE"] = "1"
_os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# An editor's language server shares the CPU with the editor and everything else the user runs.
# OpenMP's default busy-waiting makes torch dozens of times slower as soon as the cores are
# oversubscribed (measured here: 8 s instead of 23 ms per fill on two loaded cores); passive
# waiting costs nothing measurable on an idle machine. It must be set before torch is imported.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .config import EngineConfig, SamplingOptions  # noqa: E402
from .denoise import CancelToken, CanvasPlan, NeverCancelled  # noqa: E402
from .engine import Candidate, Engine, FillRequest, FillResult, load_engine  # noqa: E402
from .errors import (  # noqa: E402
    Cancelled,
    DeviceUnavailableError,
    EngineError,
    ModelLoadError,
    ModelNotFoundError,
    OutOfMemoryError,
    UnsafeWeightsError,
    UnsupportedOptionError,
    WrongArchitectureError,
)

__all__ = [
    "Candidate", "CancelToken", "Cancelled", "CanvasPlan", "DeviceUnavailableError", "Engine",
    "EngineConfig", "EngineError", "FillRequest", "FillResult", "ModelLoadError",
    "ModelNotFoundError", "NeverCancelled", "OutOfMemoryError", "SamplingOptions",
    "UnsafeWeightsError", "UnsupportedOptionError", "WrongArchitectureError", "load_engine",
]
