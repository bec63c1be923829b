"""Triton kernels for the element-wise work around the WKV recurrence (CUDA fast path).

Each replaces a few dozen small torch ops of `forward.py` with one launch (decode at batch 1 is
bound by the number of launches, not by bytes). Rows are tokens: R = B·T, row p = b·T + t.
Math is fp32; inputs and outputs keep the storage dtypes stated below.

* `ln_mix`: LayerNorm of the residual, token shift and the lerp mixes of one block:
  u = LN(x[p]) (rounded to the run dtype like the torch path), u_prev = LN(x[p - 1]) for t > 0 or
  the shift state for t = 0, out[m, p] = u + (u_prev - u)·mix[m]. u of row t == write[b] becomes
  the new shift state of b (write[b] = -1: none, an inactive decode row), written in place by
  the program that read the old one.
* `pre_wkv`: decay, in-context rate, normalised key, modified key, value residual mix, the
  identity-step masking of inactive positions, and the per-head "bonus" sum(r·k'·r_k).
* `post_wkv`: per-head GroupNorm of y, + bonus·v, times the gate.
* `relu_sq_`, `lora_act_`: in-place activations after cuBLAS products (one launch and one pass
  over the tensor instead of two: relu then square; tanh and sigmoid of two LoRA stages, and
  the zeros past each LoRA stage's width).
* `add_parts_`: x += parts[0] + parts[1] + ... in fp32, added one after another (the bits of
  as many in-place adds, in one launch).
"""

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from . import pdl

DECAY_SCALE = math.exp(-0.5)
HEAD = 64
# pre_wkv / post_wkv: a program per (row, group of heads). One program per row (all heads, padded
# to a power of two: 64 for 40) left lanes idle and too few programs at batch 256 (post_wkv
# 6.2 us a layer for 6.5 MB on the H200)
HEADS_PER_PROGRAM = 8


@triton.jit
def _row_stats(x, m, C, eps):
    """Mean and 1/std of a [BLOCK] fp32 row whose first C entries (mask m) are valid."""
    mean = tl.sum(x, axis=0) / C
    d = tl.where(m, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / C
    return mean, 1.0 / tl.sqrt(var + eps)


@triton.jit
def _ln_row(x_ptr, q, C, full, fm, c, m, lw, lb, eps, dtype):
    """Columns c of row q's LayerNorm output (statistics from the whole row), in dtype."""
    mean_q, rstd_q = _row_stats(tl.load(x_ptr + q * C + full, mask=fm, other=0.0), fm, C, eps)
    xq = tl.load(x_ptr + q * C + c, mask=m, other=0.0)
    return ((xq - mean_q) * rstd_q * lw + lb).to(dtype)


# row counts and the export's positions vary between requests: no variant for them (a T or R
# of 1 or a multiple of 16, an unaligned dummy mid_ptr), compiled in a request (session 22)
@triton.jit(do_not_specialize=["T", "R"], do_not_specialize_on_alignment=["T", "R", "mid_ptr"])
def _ln_mix_kernel(x_ptr, lnw_ptr, lnb_ptr, prev_ptr, newprev_ptr, write_ptr, mix_ptr, out_ptr,
                   mid_ptr, midprev_ptr,
                   T, C, R, eps, M: tl.constexpr, MP: tl.constexpr, BLOCK: tl.constexpr,
                   CHUNK: tl.constexpr, PDL: tl.constexpr, MID: tl.constexpr):
    """A program per (row, CHUNK columns): the row's LayerNorm statistics from the whole row,
    the mixes of its own columns (so the shift state it reads and writes is its own too).
    MID (0-2, one sequence): the shift state after mid_ptr[k] tokens (row mid_ptr[k] - 1's
    output) goes to row k of midprev ([MID, C]) too."""
    pdl.enter(PDL)
    p = tl.program_id(0).to(tl.int64)
    b = p // T
    t = p % T
    full = tl.arange(0, BLOCK)
    fm = full < C
    c = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    m = c < C
    tc = c * 0 + t                                        # t as a [CHUNK] tensor (for masks)
    lw = tl.load(lnw_ptr + c, mask=m, other=0.0)
    lb = tl.load(lnb_ptr + c, mask=m, other=0.0)
    xr = tl.load(x_ptr + p * C + full, mask=fm, other=0.0)
    mean, rstd = _row_stats(xr, fm, C, eps)
    if CHUNK == BLOCK:  # the whole row: its columns are the ones just loaded
        x = xr
    else:
        x = tl.load(x_ptr + p * C + c, mask=m, other=0.0)
    u = ((x - mean) * rstd * lw + lb).to(out_ptr.dtype.element_ty)
    up = tl.load(prev_ptr + b * C + c, mask=m & (tc == 0), other=0.0).to(tl.float32)
    if t > 0:
        mean_p, rstd_p = _row_stats(tl.load(x_ptr + (p - 1) * C + full, mask=fm, other=0.0),
                                    fm, C, eps)
        xp = tl.load(x_ptr + (p - 1) * C + c, mask=m, other=0.0)
        up = ((xp - mean_p) * rstd_p * lw + lb).to(out_ptr.dtype.element_ty).to(tl.float32)
    uf = u.to(tl.float32)
    if MP * CHUNK <= 8192:  # every mix in one 2-D load and store
        i = tl.arange(0, MP)[:, None]
        mm = (i < M) & m[None, :]
        mix = tl.load(mix_ptr + i * C + c[None, :], mask=mm, other=0.0).to(tl.float32)
        out = uf[None, :] + (up - uf)[None, :] * mix
        tl.store(out_ptr + i * R * C + p * C + c[None, :], out.to(out_ptr.dtype.element_ty),
                 mask=mm)
    else:  # a whole wide row: one mix at a time (registers)
        for i in tl.static_range(M):
            mix = tl.load(mix_ptr + i * C + c, mask=m, other=0.0).to(tl.float32)
            tl.store(out_ptr + i * R * C + p * C + c,
                     (uf + (up - uf) * mix).to(out_ptr.dtype.element_ty), mask=m)
    # the new shift state (the LayerNorm output of row write[b]) is written by the program that
    # read the old one (t = 0), so newprev may alias prev: every thread's load of it is
    # consumed above
    tl.debug_barrier()
    wt = tl.load(write_ptr + b)
    if (t == 0) & (wt == 0):  # this row (every active decode row): u, computed above
        tl.store(newprev_ptr + b * C + c, u.to(newprev_ptr.dtype.element_ty), mask=m)
    elif (t == 0) & (wt > 0):
        uq = _ln_row(x_ptr, p + wt, C, full, fm, c, m, lw, lb, eps,  # row (b, write[b])
                     out_ptr.dtype.element_ty)
        tl.store(newprev_ptr + b * C + c, uq.to(newprev_ptr.dtype.element_ty), mask=m)
    for k in tl.static_range(MID):
        wm = tl.load(mid_ptr + k) - 1
        if (t == 0) & (wm >= 0):
            um = _ln_row(x_ptr, p + wm, C, full, fm, c, m, lw, lb, eps, out_ptr.dtype.element_ty)
            tl.store(midprev_ptr + k * C + c, um.to(midprev_ptr.dtype.element_ty), mask=m)


# ln_mix at up to LN_MIX_SPLIT_ROWS rows (decode at small batch): a program per 512 columns of a
# row, so a handful of rows still spreads over several programs (at 1 row: 4.0 -> 2.5 us a launch,
# 2.9B, H200). At more rows, a program per row: each program of a split row reads the whole row
# for its statistics, which cost more than it saved at batch 256 and in prefill (measured:
# 39,625 -> 38,836 tok/s at batch 256, 73,026 -> 68,818 tok/s prefilling 64 x 512)
LN_MIX_CHUNK = 512
LN_MIX_SPLIT_ROWS = 64


def ln_mix(x: Tensor, ln_w: Tensor, ln_b: Tensor, prev: Tensor, new_prev: Tensor,
           write: Tensor, mix: Tensor, T: int, eps: float, out_dtype: torch.dtype,
           split: bool = True, mid: Tensor | None = None, mid_prev: Tensor | None = None,
           **variant) -> Tensor:
    """x: [R, C] fp32 (R = B·T rows, row-major by b then t); ln_w, ln_b: [C] fp32;
    prev: [B, C] shift state (read at t = 0); new_prev: [B, C] (gets the LayerNorm output of
    row t = write[b]; write[b] = -1: not written; may be ``prev`` itself); write: [B] int32;
    mix: [M, C]. Returns [M, R, C]. ``split``: rows may be split over programs (up to
    ``LN_MIX_SPLIT_ROWS``; False: a program per row, the same bits at any row count).
    ``mid`` ([K] integer tensor, K <= 2, one sequence) and ``mid_prev`` ([K, C] contiguous):
    row k of mid_prev gets the shift state a pass of the first ``mid[k]`` rows leaves (none
    when ``mid[k]`` < 1).
    ``variant``: launch options for benchmarks."""
    R, C = x.shape
    M = mix.shape[0]
    out = torch.empty(M, R, C, dtype=out_dtype, device=x.device)
    block = triton.next_power_of_2(C)
    chunk = min(LN_MIX_CHUNK, block) if split and R <= LN_MIX_SPLIT_ROWS else block
    # 4 warps, whole rows too (8 before session 34, measured on the H200 at 2.9B: a pass of
    # 160 / 1,888 / 4,096 tokens 0.05 / 0.7 / 1.2 ms faster, decode 1.1 % at batch 256 and
    # 1,024; a prefill keeps one program a row, so the same bits at every row count)
    opts = dict(num_warps=4, **pdl.launch_options(x.device, R))
    n_mid = 0 if mid is None or mid_prev is None else mid.shape[0]
    if n_mid and (mid_prev.shape != (n_mid, C) or mid_prev.stride(0) != C or R != T):
        raise ValueError("ln_mix's export: one sequence, a contiguous [K, C] mid_prev")
    _ln_mix_kernel[(R, triton.cdiv(C, chunk))](
        x, ln_w, ln_b, prev, new_prev, write, mix, out, mid if n_mid else write,
        mid_prev if n_mid else new_prev, T, C, R, eps, M=M, MP=triton.next_power_of_2(M),
        BLOCK=block, CHUNK=chunk, MID=n_mid, **{**opts, **variant})
    return out


@triton.jit
def decay_terms(k, wl, al, w0, a0, kkw, kaw, decay_scale):
    """pre_wkv's terms of one channel each (fp32): the decay w, the in-context rate a, the key
    before normalisation k ⊙ k_k, the modified key k'."""
    w = tl.exp(-decay_scale * tl.sigmoid(w0 + wl))
    a = tl.sigmoid(a0 + al)
    kk = k * kkw
    kp = k * (1.0 + (a - 1.0) * kaw)
    return w, a, kk, kp


@triton.jit
def mixed_value(v, vl, vf, v0):
    """The value a later layer's WKV takes (fp32; the first layer takes its own v): v mixed
    with the first layer's (vf) at the rate sigmoid(v0 + value LoRA vl)."""
    return v + (vf - v) * tl.sigmoid(v0 + vl)


@triton.jit(do_not_specialize=["R"], do_not_specialize_on_alignment=["R"])  # (as ln_mix)
def _pre_wkv_kernel(r_ptr, k_ptr, v_ptr, lora_ptr, vfirst_ptr, keep_ptr,
                    w0_ptr, a0_ptr, v0_ptr, kk_ptr, ka_ptr, rk_ptr,
                    w_out, k_out, v_out, kap_out, a_out, bonus_out,
                    R, C, H, decay_scale,
                    FIRST: tl.constexpr, HAS_KEEP: tl.constexpr, BH: tl.constexpr,
                    N: tl.constexpr):
    p = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1) * BH + tl.arange(0, BH)        # this program's heads
    j = tl.arange(0, N)
    hm = (h < H)[:, None]
    ch = h[:, None] * N + j[None, :]                    # [BH, N] channel index
    o = p * C + ch
    k = tl.load(k_ptr + o, mask=hm, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + o, mask=hm, other=0.0).to(tl.float32)
    w, a, kk, kp = decay_terms(
        k, tl.load(lora_ptr + R * C + o, mask=hm, other=0.0).to(tl.float32),
        tl.load(lora_ptr + 2 * R * C + o, mask=hm, other=0.0).to(tl.float32),
        tl.load(w0_ptr + ch, mask=hm, other=0.0).to(tl.float32),
        tl.load(a0_ptr + ch, mask=hm, other=0.0).to(tl.float32),
        tl.load(kk_ptr + ch, mask=hm, other=0.0), tl.load(ka_ptr + ch, mask=hm, other=0.0),
        decay_scale)
    kap = kk / tl.maximum(tl.sqrt(tl.sum(kk * kk, axis=1)), 1e-12)[:, None]
    bonus = tl.sum(r * kp * tl.load(rk_ptr + ch, mask=hm, other=0.0), axis=1)  # [BH]
    v = tl.load(v_ptr + o, mask=hm, other=0.0).to(tl.float32)
    if not FIRST:
        v = mixed_value(v, tl.load(lora_ptr + o, mask=hm, other=0.0).to(tl.float32),
                        tl.load(vfirst_ptr + o, mask=hm, other=0.0).to(tl.float32),
                        tl.load(v0_ptr + ch, mask=hm, other=0.0).to(tl.float32))
    if HAS_KEEP:
        keep = (tl.load(keep_ptr + p + ch * 0) != 0)
        w = tl.where(keep, w, 1.0)
        kp = tl.where(keep, kp, 0.0)
        v = tl.where(keep, v, 0.0)
        kap = tl.where(keep, kap, 0.0)
    tl.store(w_out + o, w, mask=hm)
    tl.store(k_out + o, kp, mask=hm)
    tl.store(v_out + o, v, mask=hm)
    tl.store(kap_out + o, kap, mask=hm)
    tl.store(a_out + o, a, mask=hm)
    tl.store(bonus_out + p * H + h, bonus, mask=h < H)


def pre_wkv(r: Tensor, k: Tensor, v: Tensor, lora: Tensor, v_first: Tensor | None,
            keep: Tensor | None, w0: Tensor, a0: Tensor, v0: Tensor | None, k_k: Tensor,
            k_a: Tensor, r_k: Tensor, n_head: int) -> tuple[Tensor, ...]:
    """r, k, v: [R, C] run dtype (matmul outputs); lora: [4, R, C] (v, w, a, g LoRA outputs);
    v_first: [R, C] or None (first layer: v is the value); keep: [R] bool or None;
    w0, a0, v0: [C] run dtype; k_k, k_a, r_k: [C] fp32.
    Returns (w, k', v', kappa, a) [R, C] fp32 — masked to identity steps where keep is False —
    and bonus [R, H] fp32."""
    R, C = r.shape
    f32 = dict(dtype=torch.float32, device=r.device)
    outs = tuple(torch.empty(R, C, **f32) for _ in range(5))
    bonus = torch.empty(R, n_head, **f32)
    first = v_first is None
    _pre_wkv_kernel[(R, triton.cdiv(n_head, HEADS_PER_PROGRAM))](
        r, k, v, lora, v if first else v_first, keep if keep is not None else r, w0, a0,
        w0 if first else v0, k_k, k_a, r_k, *outs, bonus, R, C, n_head, DECAY_SCALE,
        FIRST=first, HAS_KEEP=keep is not None, BH=HEADS_PER_PROGRAM, N=HEAD, num_warps=4)
    return outs + (bonus,)


@triton.jit
def _post_wkv_kernel(y_ptr, v_ptr, g_ptr, bonus_ptr, lw_ptr, lb_ptr, out_ptr,
                     C, H, eps, BH: tl.constexpr, N: tl.constexpr):
    p = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1) * BH + tl.arange(0, BH)
    j = tl.arange(0, N)
    hm = (h < H)[:, None]
    ch = h[:, None] * N + j[None, :]
    o = p * C + ch
    y = tl.load(y_ptr + o, mask=hm, other=0.0).to(tl.float32)
    mean = tl.sum(y, axis=1) / N
    d = y - mean[:, None]
    var = tl.sum(d * d, axis=1) / N
    yn = d * (1.0 / tl.sqrt(var + eps))[:, None]
    yn = yn * tl.load(lw_ptr + ch, mask=hm, other=0.0) + tl.load(lb_ptr + ch, mask=hm, other=0.0)
    bonus = tl.load(bonus_ptr + p * H + h, mask=h < H, other=0.0)
    v = tl.load(v_ptr + o, mask=hm, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + o, mask=hm, other=0.0).to(tl.float32)
    out = (yn + bonus[:, None] * v) * g
    tl.store(out_ptr + o, out.to(out_ptr.dtype.element_ty), mask=hm)


def post_wkv(y: Tensor, v: Tensor, g: Tensor, bonus: Tensor, ln_w: Tensor, ln_b: Tensor,
             eps: float, out_dtype: torch.dtype) -> Tensor:
    """y: [R, C] (WKV output); v: [R, C] (mixed value); g: [R, C] gate; bonus: [R, H];
    ln_w, ln_b: [C] fp32. Returns (GroupNorm_H(y) + bonus·v)·g: [R, C] in out_dtype."""
    R, C = y.shape
    H = bonus.shape[1]
    out = torch.empty(R, C, dtype=out_dtype, device=y.device)
    _post_wkv_kernel[(R, triton.cdiv(H, HEADS_PER_PROGRAM))](
        y, v, g, bonus, ln_w, ln_b, out, C, H, eps, BH=HEADS_PER_PROGRAM, N=HEAD, num_warps=4)
    return out


@triton.jit(do_not_specialize=["n"])  # sizes vary with the batch
def _relu_sq_kernel(x_ptr, n, BLOCK: tl.constexpr):
    """relu(x)^2 in place on x[0 .. n)."""
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    x = tl.maximum(tl.load(x_ptr + o, mask=m, other=0.0).to(tl.float32), 0.0)
    tl.store(x_ptr + o, (x * x).to(x_ptr.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["n"])
def _lora_act_kernel(h_ptr, lim_ptr, n, D: tl.constexpr, BLOCK: tl.constexpr):
    """In place on group g = program_id(1) of h [4, n / D, D]: tanh (g 1), sigmoid (g 3), as
    is (0, 2); zero past the group's width (lim[g, 0])."""
    g = tl.program_id(1)
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    p = h_ptr + g.to(tl.int64) * n + o
    x = tl.load(p, mask=m, other=0.0).to(tl.float32)
    if g == 1:
        x = 2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0
    if g == 3:
        x = tl.sigmoid(x)
    x = tl.where(o % D < tl.load(lim_ptr + 2 * g), x, 0.0)
    tl.store(p, x.to(h_ptr.dtype.element_ty), mask=m)


# 4 elements a thread: on the H200 relu_sq_ of [1,024, 10,240] fp16 took 15 us with 1,024 and
# 8 warps (or 512 and 4) against 32 us with 2,048 and 4 (`python -m server.bench large`)
_ACT_BLOCK, _ACT_WARPS = 1024, 8


def relu_sq_(x: Tensor) -> Tensor:
    """x <- relu(x)^2 in place (contiguous); returns x."""
    assert x.is_contiguous()
    n = x.numel()
    _relu_sq_kernel[(triton.cdiv(n, _ACT_BLOCK),)](x, n, BLOCK=_ACT_BLOCK, num_warps=_ACT_WARPS)
    return x


def lora_act_(h: Tensor, limits: Tensor) -> Tensor:
    """h: [4, R, D] LoRA first-stage outputs (v, w, a, g), contiguous: h[1] <- tanh(h[1]),
    h[3] <- sigmoid(h[3]), and each group's columns past its width ``limits[g, 0]`` ([4, 2]
    int32, ``fused.lora_stacks``'s overlapping stacks: products of the next group's rows)
    <- 0, in place, in one launch; returns h."""
    assert h.is_contiguous() and h.shape[0] == 4
    assert limits.is_contiguous() and limits.dtype == torch.int32 and limits.shape == (4, 2)
    n = h[0].numel()
    _lora_act_kernel[(triton.cdiv(n, _ACT_BLOCK), 4)](h, limits, n, D=h.shape[2],
                                                      BLOCK=_ACT_BLOCK, num_warps=_ACT_WARPS)
    return h


@triton.jit(do_not_specialize=["n"])
def _add_parts_kernel(x_ptr, parts_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    """x[o] <- (((x[o] + parts[0, o]) + parts[1, o]) + ...) for the BLOCK offsets o of this
    program (fp32, one rounding an add)."""
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    acc = tl.load(x_ptr + o, mask=m, other=0.0)
    for i in tl.static_range(K):
        acc = acc + tl.load(parts_ptr + i * n + o, mask=m, other=0.0)
    tl.store(x_ptr + o, acc, mask=m)


def add_parts_(x: Tensor, parts: Tensor) -> Tensor:
    """x <- x + parts[0] + parts[1] + ... in place, added in that order: the same bits as
    ``for p in parts: x.add_(p)`` in one launch. x: [R, C] fp32 contiguous; parts: [K, R, C]
    fp32 contiguous. Returns x."""
    assert x.is_contiguous() and parts.is_contiguous() and parts.shape[1:] == x.shape
    assert x.dtype == parts.dtype == torch.float32
    n = x.numel()
    _add_parts_kernel[(triton.cdiv(n, _ACT_BLOCK),)](x, parts, n, K=parts.shape[0],
                                                     BLOCK=_ACT_BLOCK, num_warps=_ACT_WARPS)
    return x
