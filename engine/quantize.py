"""Weight quantization: int8 on the CPU, fp8 and nf4 on CUDA.

int8 uses PyTorch's dynamic quantization (int8 weights, int8 GEMMs through fbgemm/oneDNN), which
is the one quantized path that runs well on a CPU. DiffusionGemma's encoder and decoder share
their layer weights, so the decoder's quantized linears are also installed in the encoder;
quantizing both separately would keep two int8 copies of every layer. fp8 and nf4 go through
transformers' own quantizers, which need a GPU.
"""

from __future__ import annotations

import warnings

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


def gpu_quantization_config(quantization: str, dtype: torch.dtype):
    """transformers' quantization config for the CUDA modes, or None for none/int8."""
    if quantization == "nf4":
        try:
            import bitsandbytes  # noqa: F401
        except ImportError as exc:
            raise UnsupportedOptionError("quantization 'nf4' needs bitsandbytes: pip install bitsandbytes") from exc
        from transformers import BitsAndBytesConfig

        return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype)
    if quantization == "fp8":
        major, minor = torch.cuda.get_device_capability()
        if (major, minor) < (8, 9):
            raise UnsupportedOptionError(f"quantization 'fp8' needs a GPU of compute capability 8.9+, found {major}.{minor}")
        from transformers import FineGrainedFP8Config

        return FineGrainedFP8Config()
    return None


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
