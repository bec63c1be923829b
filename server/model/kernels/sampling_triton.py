"""The sampler's passes over the rows in one kernel each (CUDA).

`prepare`, the first pass over the logits: for every row b and token t,

    x[b, t] = (logits[b, t] - P[b, t]) / temp[b]        (temp[b] = 1: greedy rows, or TEMPER off)
    P[b, t] = P[b, t] * decay[b]                         (decay[b] = 1 for inactive rows)

which the torch path (`BatchSampler._prepare`) does in three passes over [B, V] (subtract,
divide, the penalties' decay): each pass reads or writes ~67 MB at batch 256 with a 65,536-token
vocabulary. Same fp32 operations in the same order (IEEE division), so the results are the
torch path's bit for bit; rows are independent.

`update`, after the draw: the sampled token's penalty grows by the presence (first time) or
repetition penalty, and the row's random-stream counter by one, for active rows
(`BatchSampler._update`: ~10 small torch ops a step, each a launch). Same fp32 operations, bit
for bit.
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


@triton.jit(do_not_specialize=["B"])  # B follows the batch capacity
def _update_kernel(pen_ptr, tok_ptr, pres_ptr, rep_ptr, act_ptr, count_ptr, B, V,
                   HAS_ACTIVE: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = b < B
    pres = tl.load(pres_ptr + b, mask=m, other=0.0)
    rep = tl.load(rep_ptr + b, mask=m, other=0.0)
    step = tl.full((BLOCK,), 1, tl.int64)
    if HAS_ACTIVE:
        act = tl.load(act_ptr + b, mask=m, other=0) != 0
        pres = pres * act.to(tl.float32)
        rep = rep * act.to(tl.float32)
        step = act.to(tl.int64)
    o = b.to(tl.int64) * V + tl.load(tok_ptr + b, mask=m, other=0)
    cur = tl.load(pen_ptr + o, mask=m, other=0.0)
    tl.store(pen_ptr + o, cur + tl.where(cur == 0, pres, rep), mask=m)
    tl.store(count_ptr + b, tl.load(count_ptr + b, mask=m, other=0) + step, mask=m)


def update(penalties: Tensor, tokens: Tensor, presence: Tensor, repetition: Tensor,
           active: Tensor | None, counter: Tensor) -> None:
    """penalties [B, V] fp32 (in place, contiguous); tokens [B] int64; presence, repetition [B]
    fp32; active [B] bool or None (all); counter [B] int64 (in place)."""
    B, V = penalties.shape
    assert penalties.is_contiguous()
    block = 128
    _update_kernel[(triton.cdiv(B, block),)](
        penalties, tokens, presence, repetition, active if active is not None else tokens,
        counter, B, V, HAS_ACTIVE=active is not None, BLOCK=block, num_warps=4)
