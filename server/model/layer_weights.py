"""One layer's weights, preprocessed for the batched forward: moved to the device, cast to the run
dtype (matmul weights, mixing vectors) or kept fp32 (norms, per-channel constants used in fp32)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from server.model.checkpoint import ModelConfig, finite_weight


@dataclass
class LayerWeights:
    ln1_w: Tensor  # [C] fp32
    ln1_b: Tensor
    ln2_w: Tensor
    ln2_b: Tensor
    mix: Tensor  # [6, C] run dtype: x_r, x_w, x_k, x_v, x_a, x_g
    wr: Tensor  # [C, C] run dtype, nn.Linear layout (y = x·W^T)
    wk: Tensor
    wv: Tensor
    wo: Tensor
    w0: Tensor  # [C] run dtype
    w1: Tensor  # [C, Dw] run dtype (y = x·W)
    w2: Tensor  # [Dw, C]
    a0: Tensor
    a1: Tensor
    a2: Tensor
    v0: Tensor | None  # None in layer 0
    v1: Tensor | None
    v2: Tensor | None
    g1: Tensor
    g2: Tensor
    k_k: Tensor  # [H, N] fp32
    k_a: Tensor  # [C] fp32
    r_k: Tensor  # [C] fp32
    lnx_w: Tensor  # [C] fp32
    lnx_b: Tensor
    ffn_x_k: Tensor  # [C] run dtype
    ffn_key: Tensor  # [4C, C] run dtype, nn.Linear layout
    ffn_value: Tensor  # [C, 4C]


def layer_weights(sd: dict[str, Tensor], cfg: ModelConfig, i: int, device,
                  dtype: torch.dtype) -> LayerWeights:
    """Layer i of a checkpoint ``sd`` (any float dtype) prepared for the forward."""
    p, a = f"blocks.{i}.", f"blocks.{i}.att."
    C, H, N = cfg.n_embd, cfg.n_head, cfg.head_size

    def run(key: str) -> Tensor:  # matmul operand / mixing vector, run dtype
        t = sd[key]
        cast = t.to(device, dtype).view(-1) if t.dim() == 3 else t.to(device, dtype)
        return finite_weight(key, cast, t)

    def f32(key: str) -> Tensor:
        return finite_weight(key, sd[key].to(device, torch.float32).reshape(-1), sd[key])

    has_v = i > 0 and f"{a}v0" in sd  # (layer 0's, in some files, is never read)
    return LayerWeights(
        ln1_w=f32(p + "ln1.weight"), ln1_b=f32(p + "ln1.bias"),
        ln2_w=f32(p + "ln2.weight"), ln2_b=f32(p + "ln2.bias"),
        mix=torch.stack([run(a + "x_" + c) for c in "rwkvag"]),
        wr=run(a + "receptance.weight"), wk=run(a + "key.weight"),
        wv=run(a + "value.weight"), wo=run(a + "output.weight"),
        w0=run(a + "w0"), w1=run(a + "w1"), w2=run(a + "w2"),
        a0=run(a + "a0"), a1=run(a + "a1"), a2=run(a + "a2"),
        v0=run(a + "v0") if has_v else None, v1=run(a + "v1") if has_v else None,
        v2=run(a + "v2") if has_v else None,
        g1=run(a + "g1"), g2=run(a + "g2"),
        k_k=f32(a + "k_k").view(H, N), k_a=f32(a + "k_a"), r_k=f32(a + "r_k").view(C),
        lnx_w=f32(a + "ln_x.weight"), lnx_b=f32(a + "ln_x.bias"),
        ffn_x_k=run(p + "ffn.x_k"),
        ffn_key=run(p + "ffn.key.weight"), ffn_value=run(p + "ffn.value.weight"),
    )
