"""Write a model directory as a compressed-tensors checkpoint, the way FP8 and NVFP4 releases ship.

The released DiffusionGemma checkpoints that fit consumer GPUs are published pre-quantized in the
compressed-tensors format. Nothing here can download them, so the loader's tests and
`benchmarks/gpu.py` make their own: the same library applies the same preset schemes (`FP8_DYNAMIC`,
`NVFP4`) to a model we have, computes weight scales from the weights (min/max, which is what a
calibration run's weight observers do; activation scales of static schemes are set to 1, as no
calibration data runs), compresses, and saves with the `quantization_config` block in config.json
that transformers reads back. Needs the `quantized` extra.
"""

from __future__ import annotations

from pathlib import Path

import torch

# The preset scheme and storage format of each published kind.
SCHEMES = {"fp8": ("FP8_DYNAMIC", "float-quantized"), "nvfp4": ("NVFP4", "nvfp4-pack-quantized")}
# Kept dense, as in the releases: the tied output head and the vision tower.
IGNORE = ["lm_head", "re:.*vision_tower.*", "re:.*embed_vision.*"]


def _calibrate_weights(model: torch.nn.Module) -> int:
    """Set every quantized linear's weight scale (and NVFP4's global scale) from its weights."""
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam

    done = 0
    for module in model.modules():
        scheme = getattr(module, "quantization_scheme", None)
        if scheme is None or scheme.weights is None:
            continue
        args = scheme.weights
        weight = module.weight.data.float()  # [out, in]
        global_scale = None
        if str(getattr(args.strategy, "value", args.strategy)) == "tensor_group":
            global_scale = generate_gparam(weight.min(), weight.max())
            module.weight_global_scale.data.copy_(global_scale)
        if args.group_size:
            groups = weight.reshape(weight.shape[0], -1, args.group_size)  # [out, in / G, G]
            low, high = groups.amin(-1), groups.amax(-1)
        else:
            low, high = weight.amin(1, keepdim=True), weight.amax(1, keepdim=True)  # [out, 1]
        scale, zero = calculate_qparams(low, high, args, global_scale=global_scale)
        module.weight_scale.data.copy_(scale.reshape(module.weight_scale.shape))
        if hasattr(module, "weight_zero_point"):
            module.weight_zero_point.data.copy_(zero.reshape(module.weight_zero_point.shape))
        if hasattr(module, "input_global_scale"):
            module.input_global_scale.data.fill_(1.0)
        done += 1
    return done


def save_compressed(source: str | Path, out: str | Path, kind: str) -> Path:
    """Quantize the model directory `source` to `kind` ("fp8" or "nvfp4") and save it to `out`."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config, preset_name_to_scheme
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    preset, storage = SCHEMES[kind]
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(str(source), dtype=torch.float32, local_files_only=True)
    scheme = preset_name_to_scheme(preset, ["Linear"])
    apply_quantization_config(model, QuantizationConfig(config_groups={"group_0": scheme}, ignore=IGNORE))
    if _calibrate_weights(model) == 0:
        raise ValueError(f"{source}: no linear layer took the {kind} scheme")
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format=storage)
    compressor.compress_model(model)
    out = Path(out)
    model.save_pretrained(out)
    compressor.update_config(out)
    AutoTokenizer.from_pretrained(str(source), local_files_only=True).save_pretrained(out)
    return out
