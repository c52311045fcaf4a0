"""4-bit expert weights: what makes nf4 shrink a DiffusionGemma mixture of experts at all.

DiffusionGemma stores each layer's experts as two fused 3D parameters (`gate_up_proj` [E, 2I, H]
and `down_proj` [E, H, I]), not as linear layers, and transformers' quantizers convert linear
layers only. On the released 26B-A4B the experts are 22.8B of the 26B parameters, so "nf4" left
about 48 GB of bf16 weights. This module quantizes every expert matrix with bitsandbytes' own
nf4 code (the format and blocks of its `Linear4bit`) and, in the forward pass, dequantizes only
the experts the batch is routed to, one at a time (8 of 128 per token there), so the dense copy
is one expert's matrices at any moment. The routing and the arithmetic are those of
transformers' `DiffusionGemmaTextExperts`; only where the weights come from changes. The
encoder's layers share the decoder's (the model ties them), so one quantized module serves both.
"""

from __future__ import annotations

import torch
from torch import nn

# One absmax per 32 weights (bitsandbytes' default is 64): a bit more per weight, and on the shipped
# model half the distance from fp32 (total variation 0.09 against 0.18 with 64).
BLOCKSIZE = 32


class Nf4Experts(nn.Module):
    """A drop-in for `DiffusionGemmaTextExperts` whose expert matrices are stored in nf4."""

    def __init__(self, experts: nn.Module, compute_dtype: torch.dtype):
        import bitsandbytes.functional as bnbf

        super().__init__()
        self.num_experts = experts.num_experts
        self.act_fn = experts.act_fn
        self.compute_dtype = compute_dtype
        self.shapes = {}
        for name in ("gate_up_proj", "down_proj"):
            weights = getattr(experts, name).data  # [E, out, in]
            packed, absmax, code = [], [], None
            for matrix in weights:
                q, state = bnbf.quantize_4bit(matrix.contiguous(), blocksize=BLOCKSIZE, quant_type="nf4")
                packed.append(q)
                absmax.append(state.absmax)
                code = state.code
            self.shapes[name] = tuple(weights.shape[1:])
            self.register_buffer(f"{name}_packed", torch.stack(packed))  # [E, out * in / 2, 1] uint8
            self.register_buffer(f"{name}_absmax", torch.stack(absmax))  # [E, out * in / BLOCKSIZE]
            self.register_buffer(f"{name}_code", code)  # [16] the nf4 levels

    def weight(self, name: str, expert: int) -> torch.Tensor:
        """One expert's dense matrix, for the duration of one matmul."""
        import bitsandbytes.functional as bnbf

        state = bnbf.QuantState(absmax=getattr(self, f"{name}_absmax")[expert], shape=torch.Size(self.shapes[name]),
                                code=getattr(self, f"{name}_code"), blocksize=BLOCKSIZE, quant_type="nf4",
                                dtype=self.compute_dtype)
        return bnbf.dequantize_4bit(getattr(self, f"{name}_packed")[expert], state)

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(hidden_states)  # [T, H]
        with torch.no_grad():
            # One class more than there are experts, as transformers' routing marks dropped slots so.
            mask = nn.functional.one_hot(top_k_index, num_classes=self.num_experts + 1).permute(2, 1, 0)  # [E+1, K, T]
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for (expert,) in hit.tolist():
            if expert == self.num_experts:
                continue
            slot, token = torch.where(mask[expert])
            state = hidden_states[token].to(self.compute_dtype)  # [t, H]
            gate, up = nn.functional.linear(state, self.weight("gate_up_proj", expert)).chunk(2, dim=-1)
            state = nn.functional.linear(self.act_fn(gate) * up, self.weight("down_proj", expert))  # [t, H]
            out.index_add_(0, token, (state * top_k_weights[token, slot, None]).to(out.dtype))
        return out


def quantize_experts_nf4(model, compute_dtype: torch.dtype) -> int:
    """Replace every decoder layer's experts by `Nf4Experts`, shared with the tied encoder layer;
    returns how many were replaced."""
    decoder_layers = model.model.decoder.layers
    encoder_layers = model.model.encoder.language_model.layers
    done = 0
    for decoder_layer, encoder_layer in zip(decoder_layers, encoder_layers):
        experts = getattr(decoder_layer, "experts", None)
        if experts is None or not hasattr(experts, "gate_up_proj"):
            continue
        quantized = Nf4Experts(experts, compute_dtype)
        decoder_layer.experts = quantized
        if getattr(encoder_layer, "experts", None) is not None:
            encoder_layer.experts = quantized
        done += 1
    return done
