"""GPU figures: per-denoising-step latency at the released 26B-A4B shape, and embedded tokens/s.

The embedded model answers the "does it run on a laptop" question; this benchmark answers "what
would the released DiffusionGemma-26B-A4B cost per step on a GPU". Latency does not depend on the
weights' values, so the model is built with random weights at the published shape (SHAPE_26B),
on the meta device first and then materialised one module at a time directly on the GPU (shared
encoder/decoder parameters stay shared), so it is never allocated in CPU memory. When the GPU
cannot hold all 30 layers, it measures 6 and 12 layers and extrapolates linearly in the layer
count (t = a + b * layers) to 30; the JSON says which. Recorded: encoder prefill and per-step
decoder latency (canvas 256, self-conditioning on) at 1k and 4k context, in bf16 and, where
torchao is installed and the GPU has fp8, with fp8 linears (experts stay bf16); and tokens/s of
the embedded model; and the three quantized loading routes (FP8 and NVFP4 compressed-tensors
checkpoints, nf4 through bitsandbytes) on the shipped model, through dg-lsp's loader. Without a GPU (CI) it runs only a tiny config on the CPU to prove the code
works and writes `gpu.quick.json`.

    python -m benchmarks.gpu [--tiny] [--contexts 1024,4096] [--layers 0]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from . import common

# google/gemma-4-26B-A4B-it's text_config, as published in its config.json (the diffusion variant
# shares the backbone); transformers' DiffusionGemmaTextConfig defaults are a different shape.
SHAPE_26B = dict(
    vocab_size=262_144, hidden_size=2816, intermediate_size=2112, num_hidden_layers=30,
    num_attention_heads=16, num_key_value_heads=8, head_dim=256, global_head_dim=512,
    num_global_key_value_heads=2, num_experts=128, top_k_experts=8, moe_intermediate_size=704,
    sliding_window=1024, final_logit_softcapping=30.0, max_position_embeddings=262_144,
)
CANVAS_26B = 256
PATTERN = 6  # five sliding-window layers, then one global layer
# The same structure in miniature (5:1 sliding/global layers, wider global heads with fewer KV
# heads, top-k routing, a window shorter than the context), for the CPU smoke test.
SHAPE_TINY = dict(
    vocab_size=512, hidden_size=64, intermediate_size=64, num_hidden_layers=6, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1, num_experts=8,
    top_k_experts=2, moe_intermediate_size=16, sliding_window=32, final_logit_softcapping=30.0,
    max_position_embeddings=4096,
)


def layer_types(n: int) -> list[str]:
    return ["full_attention" if (i + 1) % PATTERN == 0 else "sliding_attention" for i in range(n)]


def build_config(text: dict, layers: int, canvas: int):
    from transformers import DiffusionGemmaConfig

    from dg_engine.tiny import TINY_VISION

    if layers % PATTERN:
        raise ValueError(f"layer counts must be multiples of {PATTERN} to keep the sliding/global pattern")
    text = dict(text, num_hidden_layers=layers, layer_types=layer_types(layers))
    return DiffusionGemmaConfig(text_config=text, vision_config=TINY_VISION, canvas_length=canvas)


def materialise(config, device: torch.device, dtype: torch.dtype):
    """Build on the meta device, then give each module real tensors on `device`, one at a time."""
    from transformers import DiffusionGemmaForBlockDiffusion

    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta"):
            model = DiffusionGemmaForBlockDiffusion(config)
    finally:
        torch.set_default_dtype(previous)
    real: dict[int, torch.nn.Parameter] = {}  # meta parameter id -> its materialised replacement
    with torch.no_grad():
        for module in model.modules():
            for name, param in list(module._parameters.items()):
                if param is None:
                    continue
                if id(param) not in real:
                    real[id(param)] = torch.nn.Parameter(torch.empty(param.shape, dtype=param.dtype, device=device), requires_grad=False)
                module._parameters[name] = real[id(param)]
            for name, buf in list(module._buffers.items()):
                if buf is not None and buf.is_meta:
                    module._buffers[name] = torch.ones(buf.shape, dtype=buf.dtype, device=device)
            try:
                model._init_weights(module)
            except KeyError:
                # transformers cannot re-initialise the vision tower's axial rotary buffers; the
                # benchmark never runs the vision tower, so plain random values do.
                for param in module.parameters(recurse=False):
                    param.normal_(0.0, 0.02)
    return model.eval()


def unique_bytes(model) -> int:
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel() * p.element_size()
    return total


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


@torch.inference_mode()
def step_latency(model, context: int, canvas: int, steps: int, device: torch.device) -> dict:
    """Encoder prefill of `context` random tokens, then `steps` decoder passes over the canvas."""
    from transformers import DynamicCache

    vocab = model.config.get_text_config().vocab_size
    cache = DynamicCache(config=model.config.get_text_config())
    ids = torch.randint(8, vocab, (1, context), device=device)
    sync(device)
    started = time.perf_counter()
    for offset in range(0, context, 2048):
        chunk = ids[:, offset : offset + 2048]
        positions = torch.arange(offset, offset + chunk.shape[1], device=device)[None]
        model.model.encoder(input_ids=chunk, past_key_values=cache, position_ids=positions)
    sync(device)
    prefill_ms = (time.perf_counter() - started) * 1000
    canvas_ids = torch.randint(0, vocab, (1, canvas), device=device)
    logits, times = None, []
    for i in range(steps + 2):  # two warm-up steps
        sync(device)
        started = time.perf_counter()
        logits = model(decoder_input_ids=canvas_ids, past_key_values=cache, self_conditioning_logits=logits).logits
        canvas_ids = logits.argmax(-1)
        sync(device)
        if i >= 2:
            times.append((time.perf_counter() - started) * 1000)
    return {"context": context, "canvas": canvas, "prefill_ms": round(prefill_ms, 2), "step_ms": common.summary(times)}


def fp8_linears(model) -> str | None:
    """Swap nn.Linear for fp8 (torchao); returns why it could not, or None."""
    try:
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, quantize_
    except ImportError:
        return "torchao is not installed"
    if torch.cuda.get_device_capability() < (8, 9):
        return "fp8 needs compute capability 8.9+"
    try:
        quantize_(model, Float8DynamicActivationFloat8WeightConfig())
    except Exception as exc:  # record, do not fail the bf16 figures
        return f"{type(exc).__name__}: {exc}"[:300]
    return None


def measure_shape(text: dict, canvas: int, contexts: list[int], steps: int, device, dtype, layers: int, fp8: bool) -> dict:
    counts = [layers] if layers else [text["num_hidden_layers"]]
    out: dict = {"dtype": str(dtype).removeprefix("torch."), "layers_built": counts, "runs": {}}
    for count in counts:
        model = materialise(build_config(text, count, canvas), device, dtype)
        out.setdefault("weights_gb", {})[count] = round(unique_bytes(model) / 1e9, 2)
        if fp8:
            why = fp8_linears(model)
            if why:
                del model
                return {"skipped": why}
        out["runs"][count] = [step_latency(model, c, canvas, steps, device) for c in contexts]
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return out


def measure_reduced(text: dict, canvas: int, contexts: list[int], steps: int, device, dtype, target_layers: int) -> dict:
    """6 and 12 layers built and measured, then extrapolated to `target_layers`."""
    out: dict = {"dtype": str(dtype).removeprefix("torch."), "runs": {}, "weights_gb": {}}
    for count in (PATTERN, 2 * PATTERN):
        part = measure_shape(text, canvas, contexts, steps, device, dtype, count, fp8=False)
        out["runs"].update(part["runs"])
        out["weights_gb"].update(part["weights_gb"])
    extrapolate(out, target_layers)
    return out


def extrapolate(result: dict, target_layers: int) -> None:
    """Fit t = a + b * layers on two reduced builds and add the figure for `target_layers`."""
    runs = result.get("runs", {})
    if len(runs) != 2:
        return
    (l1, r1), (l2, r2) = sorted(runs.items())
    result["extrapolated"] = []
    for a, b in zip(r1, r2):
        per_layer = (b["step_ms"]["p50"] - a["step_ms"]["p50"]) / (l2 - l1)
        step = a["step_ms"]["p50"] + per_layer * (target_layers - l1)
        result["extrapolated"].append({"context": a["context"], "layers": target_layers, "step_ms_p50": round(step, 2),
                                       "per_layer_ms": round(per_layer, 3)})


def embedded_tokens_per_second(model: str, device: str, quick: bool) -> dict:
    from dg_engine import EngineConfig, FillRequest, load_engine

    from .fixtures import token_spans

    engine = load_engine(EngineConfig(model=model, device=device))
    spans = token_spans(engine.tokenizer, 16 if quick else 64, 2 if quick else 10)
    engine.fill(FillRequest(spans[0].prefix, spans[0].suffix))
    tokens, seconds = 0, 0.0
    for span in spans:
        started = time.perf_counter()
        result = engine.fill(FillRequest(span.prefix, span.suffix, max_canvases=4, reuse_cache=False))
        seconds += time.perf_counter() - started
        tokens += len(result.candidates[0].token_ids)
    return {"device": device, "fills": len(spans), "tokens": tokens, "tokens_per_s": round(tokens / max(seconds, 1e-9), 1)}


def quantized_loads(device: str, quick: bool) -> dict:
    """The three quantized routes users take, through dg-lsp's own loader on the shipped model's
    real weights: FP8 and NVFP4 compressed-tensors checkpoints (written by that library) and nf4
    on the fly. Per route: load seconds, weight bytes, fill latency, and the total-variation
    distance of one decoder pass's distributions from the unquantized load's."""
    import tempfile
    from pathlib import Path

    from dg_engine import EngineConfig, FillRequest, load_engine
    from dg_engine.compressed import save_compressed
    from dg_engine.kvcache import fork
    from dg_engine.loader import EMBEDDED_DIR

    def distributions(engine) -> torch.Tensor:
        prompt = engine.format.infill_ids("def mean(values):\n    total = sum(values)\n    return ", "\n")
        prefill = engine.prefix_cache.prefill(prompt, reuse=False)
        canvas = torch.randint(0, engine.vocab_size, (4, 32), generator=torch.Generator().manual_seed(0))  # [N, C]
        with torch.inference_mode():
            logits = engine._decode(canvas.to(engine.device), None, fork(prefill.cache, 4)).float()  # [N, C, V]
        return torch.softmax(logits, -1).cpu()

    out, reference = {}, None
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("none", "fp8", "nvfp4", "nf4"):
            try:
                if name in ("fp8", "nvfp4"):
                    config = EngineConfig(model=str(save_compressed(EMBEDDED_DIR, Path(tmp) / name, name)), device=device)
                else:
                    config = EngineConfig(device=device, quantization=name)
                started = time.perf_counter()
                engine = load_engine(config)
                row = {"load_s": round(time.perf_counter() - started, 2), "quantization": engine.info()["quantization"],
                       "weight_bytes": engine.memory_bytes}
                probs = distributions(engine)
                reference = probs if reference is None else reference
                row["tv_from_unquantized"] = round(0.5 * (probs - reference).abs().sum(-1).mean().item(), 4)
                request = FillRequest("def mean(values):\n    total = sum(values)\n    return ", "\n", reuse_cache=False)
                engine.fill(request)
                times = []
                for _ in range(2 if quick else 10):
                    started = time.perf_counter()
                    engine.fill(request)
                    times.append((time.perf_counter() - started) * 1000)
                row["fill_ms_median"] = round(sorted(times)[len(times) // 2], 1)
                out[name] = row
            except Exception as exc:  # One route failing must not hide the others' numbers.
                out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="a tiny config on the CPU (what CI runs)")
    p.add_argument("--quick", action="store_true", help="same as --tiny")
    p.add_argument("--model", default=None, help="the model for tokens/s ('embedded' by default)")
    p.add_argument("--contexts", default="1024,4096")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--layers", type=int, default=0, help="build this many layers only (0: all 30 if they fit, else 6 and 12)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    previous_threads = torch.get_num_threads()
    try:
        return run(args)
    finally:
        torch.set_num_threads(previous_threads)


def run(args) -> dict:
    from .fixtures import model_label, resolve_model

    tiny = args.tiny or args.quick or not torch.cuda.is_available()
    load_before = os.getloadavg()
    if tiny:
        torch.set_num_threads(1)  # a smoke test: one thread stays fast on a loaded machine
        device, dtype = torch.device("cpu"), torch.bfloat16
        text, shape = dict(SHAPE_TINY), {"name": "tiny 26B-A4B-shaped config (CPU smoke test)", **SHAPE_TINY}
        bf16 = measure_shape(text, 16, [64, 128], 3, device, dtype, 0, fp8=False)
        bf16["reduced_check"] = measure_reduced(text, 16, [64], 3, device, dtype, 30)  # exercises the fallback
        fp8 = {"skipped": "no GPU"}
        model = resolve_model(args.model, True)
    else:
        device, dtype = torch.device("cuda"), torch.bfloat16
        text, shape = dict(SHAPE_26B), {"name": "google/diffusiongemma-26B-A4B (gemma-4-26B-A4B text backbone)", **SHAPE_26B}
        contexts = [int(c) for c in args.contexts.split(",")]
        layers = args.layers
        free, _ = torch.cuda.mem_get_info()
        estimate = 26e9 * 2 * 1.25
        reduced = layers == 0 and free < estimate
        if reduced:
            bf16 = measure_reduced(text, CANVAS_26B, contexts, args.steps, device, dtype, SHAPE_26B["num_hidden_layers"])
            bf16["note"] = f"{free / 1e9:.0f} GB free < {estimate / 1e9:.0f} GB: measured 6 and 12 layers, extrapolated to 30"
        else:
            bf16 = measure_shape(text, CANVAS_26B, contexts, args.steps, device, dtype, layers, fp8=False)
        fp8 = measure_shape(text, CANVAS_26B, contexts, args.steps, device, dtype, layers or (6 if reduced else 0), fp8=True)
        model = resolve_model(args.model, False)
    try:
        embedded = embedded_tokens_per_second(model, device.type, tiny)
    except Exception as exc:
        embedded = {"skipped": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        quantized = quantized_loads(device.type, tiny)
    except ImportError as exc:
        quantized = {"skipped": f"the quantized extra is not installed ({exc})"}
    payload = {
        "model": model_label(model),
        "quick": tiny,
        "shape": shape,
        "settings": {"materialisation": "meta device, then module by module on the target device (shared parameters kept shared)",
                     "weights": "random", "self_conditioning": True},
        "load": {"before": load_before, "after": os.getloadavg()},
        "bf16": bf16,
        "fp8": fp8,
        "embedded": embedded,
        "quantized_loads": quantized,
    }
    path = common.write("gpu", payload, quick=tiny)
    print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
