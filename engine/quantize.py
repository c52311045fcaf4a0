"""Weight quantization: int8 and nf4 on the fly, and the pre-quantized checkpoints users download.

int8 uses PyTorch's dynamic quantization (int8 weights, int8 GEMMs through fbgemm/oneDNN), which
is the quantized path that runs fastest on a CPU. DiffusionGemma's encoder and decoder share
their layer weights, so the decoder's quantized linears are also installed in the encoder;
quantizing both separately would keep two int8 copies of every layer. fp8 and nf4 go through
transformers' own quantizers (nf4 through bitsandbytes, whose CPU backend also runs it).

Released checkpoints come pre-quantized in the compressed-tensors format (FP8, NVFP4) or as
bitsandbytes 4-bit files; `checkpoint_format` reads which from config.json, and
`prequantized_config` says how transformers loads it here. The one rule both quantizer routes
need: transformers leaves tied weights unquantized by default, and every text layer of
DiffusionGemma is tied (encoder to decoder), so the modules to skip are named explicitly;
otherwise "nf4" would quantize nothing but the vision tower.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn

from .errors import UnsupportedOptionError


def quantize_int8(model) -> None:
    """Replace the decoder's and lm_head's linears by dynamically quantized int8 ones, in place."""
    from torch.ao.quantization import quantize_dynamic

    decoder_layers = model.model.decoder.layers
    encoder_layers = model.model.encoder.language_model.layers
    with warnings.catch_warnings():
        # PyTorch marks the quantized tensor API as deprecated; it is still the CPU int8 path.
        warnings.simplefilter("ignore")
        for decoder_layer, encoder_layer in zip(decoder_layers, encoder_layers):
            quantize_dynamic(decoder_layer, {nn.Linear}, dtype=torch.qint8, inplace=True)
            _share_linears(decoder_layer, encoder_layer)
        quantize_dynamic(model.model.decoder.self_conditioning, {nn.Linear}, dtype=torch.qint8, inplace=True)
        # The lm_head is tied to the embeddings; its int8 copy costs a quarter of the fp32 table
        # and makes the largest matmul of every step four times cheaper to read.
        holder = nn.Module()
        holder.lm_head = model.lm_head
        quantize_dynamic(holder, {nn.Linear}, dtype=torch.qint8, inplace=True)
        model.lm_head = holder.lm_head


def _share_linears(source: nn.Module, target: nn.Module) -> None:
    """Point every linear of `target` at the quantized module at the same path in `source`."""
    quantized = {name: module for name, module in source.named_modules() if _is_quantized(module)}
    for name, module in quantized.items():
        parent_name, _, attr = name.rpartition(".")
        parent = target.get_submodule(parent_name) if parent_name else target
        setattr(parent, attr, module)


def _is_quantized(module: nn.Module) -> bool:
    return type(module).__name__ == "DynamicQuantizedLinear" or type(module).__name__ == "Linear" and hasattr(
        module, "_packed_params"
    )


# Never quantized: the tied output head, the mixture-of-experts routers (a few outputs each, and
# where a rounding error changes which expert runs), and the vision tower a code model never runs.
SKIP_MODULES = ["lm_head", "router", "vision_tower", "embed_vision"]
# As transformers' quantizers match them: a regex from the start of the module's full name.
SKIP_PATTERNS = [rf".*\b{name}" for name in SKIP_MODULES]


def gpu_quantization_config(quantization: str, dtype: torch.dtype):
    """transformers' quantization config for nf4 and fp8 on the fly, or None for none/int8."""
    if quantization == "nf4":
        try:
            import bitsandbytes  # noqa: F401
        except ImportError as exc:
            raise UnsupportedOptionError("quantization 'nf4' needs bitsandbytes: pip install 'dg-lsp[quantized]'") from exc
        from transformers import BitsAndBytesConfig

        return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype,
                                  llm_int8_skip_modules=SKIP_PATTERNS)
    if quantization == "fp8":
        major, minor = torch.cuda.get_device_capability()
        if (major, minor) < (8, 9):
            raise UnsupportedOptionError(f"quantization 'fp8' needs a GPU of compute capability 8.9+, found {major}.{minor}")
        from transformers import FineGrainedFP8Config

        return FineGrainedFP8Config(modules_to_not_convert=SKIP_PATTERNS)
    return None


@dataclass(frozen=True)
class CheckpointFormat:
    """How a checkpoint's weights are stored: `name` is what `dg-lsp check` prints."""

    name: str  # "none", "fp8", "nvfp4", "int4", "nf4", ...
    method: str = ""  # config.json's quant_method: "compressed-tensors", "bitsandbytes", ...

    @property
    def prequantized(self) -> bool:
        return self.method != ""


# compressed-tensors' storage formats, by the name users know them by.
COMPRESSED_FORMATS = {
    "float-quantized": "fp8",
    "naive-quantized": "fp8",
    "nvfp4-pack-quantized": "nvfp4",
    "mxfp4-pack-quantized": "mxfp4",
    "pack-quantized": "int4",
    "int-quantized": "int8",
}


def checkpoint_format(config: dict) -> CheckpointFormat:
    """The weight format a model directory's config.json declares."""
    quant = config.get("quantization_config") or {}
    method = quant.get("quant_method", "")
    if not method:
        return CheckpointFormat("none")
    if method == "compressed-tensors":
        fmt = quant.get("format") or ""
        return CheckpointFormat(COMPRESSED_FORMATS.get(fmt, fmt or "compressed"), method)
    if method == "bitsandbytes":
        if quant.get("load_in_4bit") or quant.get("_load_in_4bit"):
            return CheckpointFormat(quant.get("bnb_4bit_quant_type", "nf4"), method)
        return CheckpointFormat("int8-bnb", method)
    return CheckpointFormat(method, method)


def prequantized_config(fmt: CheckpointFormat, requested: str):
    """The quantization config that loads a pre-quantized checkpoint here, or a clear refusal.

    compressed-tensors weights are decompressed at load to the requested dtype, on the CPU and on
    CUDA alike: transformers would otherwise decompress them on the first forward anyway (its FP8
    kernel route skips tied layers, which are all of DiffusionGemma's text layers). The memory is
    then the dense model's; vLLM (the remote backend) is the route that runs FP8/NVFP4 natively.
    bitsandbytes files load as they are, on CUDA or through bitsandbytes' CPU backend."""
    if requested not in ("none", "int8"):
        raise UnsupportedOptionError(
            f"the checkpoint is already quantized ({fmt.name}, {fmt.method}); drop --quantization {requested}"
        )
    if fmt.method == "compressed-tensors":
        try:
            import compressed_tensors  # noqa: F401
        except ImportError as exc:
            raise UnsupportedOptionError(
                f"this checkpoint is {fmt.name} in the compressed-tensors format, which needs the "
                "compressed-tensors package: pip install 'dg-lsp[quantized]'"
            ) from exc
        from transformers import CompressedTensorsConfig

        return CompressedTensorsConfig(dequantize=True)
    if fmt.method == "bitsandbytes":
        if requested == "int8":
            raise UnsupportedOptionError("the checkpoint is bitsandbytes-quantized; drop --quantization int8")
        try:
            import bitsandbytes  # noqa: F401
        except ImportError as exc:
            raise UnsupportedOptionError(
                f"this checkpoint is {fmt.name} from bitsandbytes: pip install 'dg-lsp[quantized]'"
            ) from exc
        return None  # transformers reads the file's own config.
    raise UnsupportedOptionError(
        f"the checkpoint is quantized with '{fmt.method}'; dg-lsp loads compressed-tensors (FP8, NVFP4) "
        "and bitsandbytes checkpoints, or unquantized ones with --quantization int8, nf4 or fp8"
    )


def describe(fmt: CheckpointFormat, requested: str, dtype: torch.dtype) -> str:
    """What `dg.status` and `dg-lsp check` say about the weights."""
    if not fmt.prequantized:
        return requested
    how = f"decompressed to {str(dtype).removeprefix('torch.')}" if fmt.method == "compressed-tensors" else "as stored"
    return f"{fmt.name} checkpoint ({fmt.method}, {how})" + (", then int8" if requested == "int8" else "")


def quantized_linears(model: nn.Module) -> tuple[int, int]:
    """(quantized, all) linears meant to be quantized (all but SKIP_MODULES), so a quantizer that
    skipped some shows."""
    quantized = total = 0
    for name, module in model.named_modules():
        kind = type(module).__name__
        if "Linear" not in kind or any(skip in name.split(".") for skip in SKIP_MODULES):
            continue
        total += 1
        quantized += kind != "Linear" or _is_quantized(module)
    return quantized, total


def model_bytes(model: nn.Module) -> int:
    """Bytes held by parameters, buffers and packed int8 weights, each tensor counted once."""
    seen: set[int] = set()
    total = 0
    for tensor in list(model.parameters()) + list(model.buffers()):
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            total += tensor.numel() * tensor.element_size()
    for module in model.modules():
        if _is_quantized(module) and id(module) not in seen:
            seen.add(id(module))
            weight, bias = module._weight_bias()
            total += weight.numel() * weight.element_size() + (0 if bias is None else bias.numel() * 4)
    return total


def model_parameters(model: nn.Module) -> int:
    """Parameters, quantized or not: `parameters()` alone misses the packed int8 weights. A tied
    lm_head's int8 copy is the embedding table again, so it is not counted twice."""
    tied = getattr(model.config, "tie_word_embeddings", False)
    count = sum(p.numel() for p in model.parameters())
    for name, module in model.named_modules():
        if _is_quantized(module) and not (tied and name == "lm_head"):
            weight, bias = module._weight_bias()
            count += weight.numel() + (0 if bias is None else bias.numel())
    return count
