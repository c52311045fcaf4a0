"""Find, check and load a DiffusionGemma model directory, with an error a user can act on.

One code path loads the embedded model shipped in this package, a local directory, or a Hugging
Face id from the local cache. Everything a user can get wrong (a missing directory, pickle-only
weights, a model of another architecture, a device that is not there, an option the device
cannot do, memory running out) is checked here and raised as a specific `ModelLoadError`.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from .config import EngineConfig
from .errors import (
    DeviceUnavailableError,
    ModelLoadError,
    ModelNotFoundError,
    OutOfMemoryError,
    UnsafeWeightsError,
    UnsupportedOptionError,
    WrongArchitectureError,
)

EMBEDDED_DIR = Path(__file__).with_name("embedded")
ARCHITECTURE = "DiffusionGemmaForBlockDiffusion"
MODEL_TYPE = "diffusion_gemma"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


@dataclass(frozen=True)
class Placement:
    device: torch.device
    dtype: torch.dtype
    quantization: str


def resolve_source(model: str) -> Path:
    """The directory for `embedded`, a local path, or a cached Hugging Face id."""
    if model == "embedded":
        if not (EMBEDDED_DIR / "config.json").is_file():
            raise ModelNotFoundError(
                f"the embedded model is not installed at {EMBEDDED_DIR}; train and export it with "
                "`make train`, or pass --model with a model directory"
            )
        return EMBEDDED_DIR
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelNotFoundError(f"{path} is a file; pass the model directory that holds config.json")
        return path
    is_hub_id = model.count("/") == 1 and not model.startswith((".", "/", "~"))
    if is_hub_id:
        return _from_hub_cache(model)
    raise ModelNotFoundError(f"model directory {path} does not exist; pass a directory with config.json")


def _from_hub_cache(model_id: str) -> Path:
    from huggingface_hub import snapshot_download

    allow = os.environ.get("DG_LSP_ALLOW_DOWNLOAD") == "1"
    try:
        return Path(snapshot_download(model_id, local_files_only=not allow))
    except Exception as exc:  # The hub raises several classes for "not cached"; all mean the same here.
        raise ModelNotFoundError(
            f"model '{model_id}' is not in the local Hugging Face cache and downloads are off; "
            "download it once with `huggingface-cli download` or set DG_LSP_ALLOW_DOWNLOAD=1"
        ) from exc


def check_directory(path: Path) -> dict:
    """Refuse anything that is not a safetensors DiffusionGemma directory; returns config.json."""
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ModelNotFoundError(f"{path} has no config.json; it is not a model directory")
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{config_file} is not valid JSON: {exc}") from exc
    architectures = config.get("architectures") or []
    if config.get("model_type") != MODEL_TYPE and ARCHITECTURE not in architectures:
        found = config.get("model_type") or ", ".join(architectures) or "unknown"
        raise WrongArchitectureError(
            f"{path} holds a '{found}' model; dg-lsp runs {ARCHITECTURE} (model_type '{MODEL_TYPE}') models only"
        )
    files = [p.name for p in path.iterdir()]
    if not any(name.endswith(".safetensors") for name in files):
        if any(name.endswith(PICKLE_SUFFIXES) for name in files):
            raise UnsafeWeightsError(
                f"{path} has only pickle weights ({', '.join(n for n in files if n.endswith(PICKLE_SUFFIXES))}); "
                "pickle can run arbitrary code, so dg-lsp loads safetensors only. Convert the weights "
                "to model.safetensors with safetensors' save_file in a trusted environment"
            )
        raise ModelLoadError(f"{path} has no model.safetensors weights")
    return config


def placement(config: EngineConfig) -> Placement:
    """Device, dtype and quantization for the request, or a clear error if it cannot be done."""
    cuda = torch.cuda.is_available()
    if config.device == "cuda" and not cuda:
        raise DeviceUnavailableError(
            "device 'cuda' was requested but no CUDA GPU is available (torch.cuda.is_available() is False); "
            "use --device cpu or auto"
        )
    device = torch.device("cuda" if config.device == "cuda" or (config.device == "auto" and cuda) else "cpu")
    if config.quantization == "fp8" and device.type != "cuda":
        raise UnsupportedOptionError(
            "quantization 'fp8' needs a CUDA GPU; on the CPU use 'int8' (fastest) or 'nf4' (smallest)"
        )
    if config.quantization == "int8" and device.type != "cpu":
        raise UnsupportedOptionError("quantization 'int8' is the CPU path; on a GPU use 'fp8' or 'nf4'")
    if config.dtype == "auto":
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    else:
        dtype = getattr(torch, config.dtype)
    if device.type == "cpu" and dtype == torch.float16:
        raise UnsupportedOptionError("float16 is not supported on the CPU; use float32 or bfloat16")
    return Placement(device, dtype, config.quantization)


def load_model(path: Path, where: Placement, adapter: str = ""):
    """Load weights and tokenizer; never pickle, never remote code, never the network.

    An `adapter` is applied to the full-precision weights before any int8 quantization; one that
    does not fit raises `AdapterError` (a `ModelLoadError`)."""
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    from .quantize import checkpoint_format, gpu_quantization_config, prequantized_config, quantize_int8

    kwargs = dict(dtype=where.dtype, use_safetensors=True, trust_remote_code=False, local_files_only=True)
    fmt = checkpoint_format(json.loads((path / "config.json").read_text()))
    if fmt.prequantized:
        quant = prequantized_config(fmt, where.quantization)
        on_device = fmt.method == "bitsandbytes"  # bitsandbytes places its own weights.
    else:
        quant = gpu_quantization_config(where.quantization, where.dtype)
        on_device = quant is not None
    if quant is not None:
        kwargs.update(quantization_config=quant)
    # nf4 loads on the CPU, where the fused experts (most of a mixture of experts' weights, and
    # no linear layers) are quantized too before the model moves to the GPU: loading them onto the
    # GPU first would need the bf16 model's memory there (see experts.py).
    staged = where.quantization == "nf4" and not fmt.prequantized
    if on_device:
        cuda = where.device.type == "cuda" and not staged
        kwargs.update(device_map={"": (where.device.index or 0) if cuda else "cpu"})
    try:
        # A decompressed checkpoint leaves its activation scales unused, which transformers reports
        # as unexpected keys; that report is expected here and only alarms the user.
        verbosity = hf_logging.get_verbosity()
        if fmt.method == "compressed-tensors":
            hf_logging.set_verbosity_error()
        try:
            with warnings.catch_warnings():
                # Passing `dequantize` for a checkpoint that has its own quantization_config is the
                # documented way to choose how it loads; transformers still warns about it.
                warnings.filterwarnings("ignore", message="You passed `quantization_config`")
                model = DiffusionGemmaForBlockDiffusion.from_pretrained(str(path), **kwargs)
        finally:
            hf_logging.set_verbosity(verbosity)
        if staged:
            from .experts import quantize_experts_nf4

            quantize_experts_nf4(model, where.dtype)
        if not on_device or staged:
            model = model.to(where.device)
        model.eval()
        if adapter:
            from .adapt.adapter import fingerprint, load_into

            if on_device:
                raise UnsupportedOptionError("adapters apply to unquantized weights; use --quantization none or int8")
            load_into(model, Path(adapter).expanduser(), fingerprint(path))
        if where.quantization == "int8":
            quantize_int8(model)
        tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False, local_files_only=True)
    except (torch.OutOfMemoryError, MemoryError) as exc:
        raise OutOfMemoryError(
            f"out of memory while loading {path} on {where.device}; try --quantization "
            f"{'int8' if where.device.type == 'cpu' else 'nf4'}, a smaller model, or --device cpu"
        ) from exc
    except ModelLoadError:
        raise
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise ModelLoadError(f"could not load the model in {path}: {exc}") from exc
    return model, tokenizer
