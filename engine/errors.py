"""Errors the engine raises on purpose, each with a message a user can act on.

The language server turns these into one clear message (and empty results) instead of a stack
trace, so every failure mode that a user can fix has its own class and says how to fix it.
"""

from __future__ import annotations


class EngineError(Exception):
    """Base class for every error the engine raises deliberately."""


class ModelLoadError(EngineError):
    """The model could not be loaded; the message says why and how to fix it."""


class ModelNotFoundError(ModelLoadError):
    """The model directory or cached model id does not exist."""


class UnsafeWeightsError(ModelLoadError):
    """The model ships only pickle weights, which we refuse to load."""


class WrongArchitectureError(ModelLoadError):
    """The directory holds a model of another architecture."""


class DeviceUnavailableError(ModelLoadError):
    """The requested device (or a quantization that needs it) is not present."""


class UnsupportedOptionError(ModelLoadError):
    """An option combination that the chosen device or model cannot do."""


class OutOfMemoryError(EngineError):
    """The device ran out of memory; only the request that hit it fails."""


class Cancelled(EngineError):
    """The request was cancelled; the denoising loop stopped between two steps."""
