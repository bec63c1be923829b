"""The sampler's first pass over the logits in one kernel (CUDA): for every row b and token t,

    x[b, t] = (logits[b, t] - P[b, t]) / temp[b]        (temp[b] = 1: greedy rows, or TEMPER off)
    P[b, t] = P[b, t] * decay[b]                         (decay[b] = 1 for inactive rows)

which the torch path (`BatchSampler._prepare`) does in three passes over [B, V] (subtract,
divide, the penalties' decay): each pass reads or writes ~67 MB at batch 256 with a 65,536-token
vocabulary. Same fp32 operations in the same order (IEEE division), so the results are the
torch path's bit for bit; rows are independent.
"""

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _prepare_kernel(logits_ptr, pen_ptr, temp_ptr, decay_ptr, x_ptr, V,
                    TEMPER: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = t < V
    o = b * V + t
    p = tl.load(pen_ptr + o, mask=m, other=0.0)
    x = tl.load(logits_ptr + o, mask=m, other=0.0).to(tl.float32) - p
    if TEMPER:
        x = tl.math.div_rn(x, tl.load(temp_ptr + b + t * 0))
    tl.store(x_ptr + o, x, mask=m)
    tl.store(pen_ptr + o, p * tl.load(decay_ptr + b + t * 0), mask=m)


_BLOCK = 4096


def prepare(logits: Tensor, penalties: Tensor, temp: Tensor | None, decay: Tensor) -> Tensor:
    """logits [B, V] (any float dtype), penalties [B, V] fp32 (decayed in place); temp [B] fp32
    or None (no division); decay [B] fp32. Returns x [B, V] fp32."""
    B, V = logits.shape
    assert logits.is_contiguous() and penalties.is_contiguous()
    x = torch.empty(B, V, dtype=torch.float32, device=logits.device)
    _prepare_kernel[(B, triton.cdiv(V, _BLOCK))](
        logits, penalties, decay if temp is None else temp, decay, x, V, TEMPER=temp is not None,
        BLOCK=_BLOCK, num_warps=8)
    return x
