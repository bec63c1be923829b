"""One kernel for a decode step's time mix between its products: `pre_wkv` + the WKV step +
`post_wkv` of fused_triton.py / wkv_triton.py in a single launch, one program per (row, head).

Everything between the r/k/v/LoRA products and the output product is local to a head: the decay,
in-context rate and key normalisation are per channel or per head, the state update of a head
reads only that head's vectors, and the GroupNorm groups are the heads. So a program loads the
head's inputs (run dtype), keeps every intermediate in registers (fp32, the same operations in
the same order as the three-kernel path), updates the head's [N, N] state in place and writes
the gated, normalised output (run dtype): no fp32 [B, C] intermediates go through memory and
two launches a layer disappear. Inactive rows (keep = 0) take an identity step (state unchanged).

Above SMALL_ROWS rows the state traffic dominates (batch 1,024, fp16 state: 671 MB a layer read
and written) and the launch takes few warps per program and streams the state past L2
(evict_first): on the H200 (`python -m server.bench large`, 2.9B shape) 212 / 49 us a layer at
batch 1,024 / 256 with fp16 state against 251 / 67 for the form it replaced (each head's state
over four programs of 16 value rows, then post_wkv as its own launch), and 343 / 89 with fp32
state with one warp (the default 8 warps: 570 / 147). One warp for fp16 state too measured
faster alone (195 vs 212 us at batch 1,024) but not in the step: the profiled step's kernel took
224 us a layer against 218 with two warps, decode 52,139 / 42,910 tok/s at batch 1,024 / 256
against 52,168 / 43,809 (docs/performance.md, session 8).
"""

import torch
import triton
import triton.language as tl
from torch import Tensor

from . import pdl
from .fused_triton import HEAD, decay_terms, mixed_value, post_wkv, pre_wkv
from .wkv_triton import _sm_count, _state_view


@triton.jit
def _decode_kernel(r_ptr, k_ptr, v_ptr, lora_ptr, vfirst_ptr, keep_ptr,
                   w0_ptr, a0_ptr, v0_ptr, kk_ptr, ka_ptr, rk_ptr, lw_ptr, lb_ptr,
                   S_ptr, out_ptr, R, C, H, s_sb, s_sh, decay_scale, eps,
                   FIRST: tl.constexpr, HAS_KEEP: tl.constexpr, N: tl.constexpr,
                   PDL: tl.constexpr, EARLY: tl.constexpr = False, EVICT: tl.constexpr = "",
                   HEADS: tl.constexpr = 1, STAGES: tl.constexpr = 1):
    """One program per (row, HEADS consecutive heads); HEADS > 1 (a benchmark variant) loops
    over them, STAGES > 1 letting the compiler load the next head's state ahead. Measured on the
    H200 (session 9): one warp looping over 2 heads, 3 stages, took 185 us a layer alone at batch
    1,024 against 214 for the launch below, but 248 against 221 in the profiled step (decode
    51,069 against 53,155 tok/s); with 2 stages the step was no faster (53,232 against 53,414
    tok/s, `decode --time-mix`). Not used. Nor is a persistent grid (1,056 or 2,112 programs
    striding over the (row, head) items, 2-3 in flight; session 16): 20.2-21.5 ms a step at
    batch 1,024 against 19.2 for the launch below (docs/performance.md); nor one that loads the
    next item's state (and vectors) into registers before computing the current one: 19.5-34.2
    ms against 18.6-18.8 (session 16, 168-203 registers against 127 for the launch below)."""
    pdl.enter(PDL)
    pid = tl.program_id(0)
    groups = H // HEADS
    b = (pid // groups).to(tl.int64)
    h0 = (pid % groups) * HEADS
    if HEADS == 1:
        _decode_head(r_ptr, k_ptr, v_ptr, lora_ptr, vfirst_ptr, keep_ptr, w0_ptr, a0_ptr,
                     v0_ptr, kk_ptr, ka_ptr, rk_ptr, lw_ptr, lb_ptr, S_ptr, out_ptr, R, C,
                     s_sb, s_sh, decay_scale, eps, b, h0, FIRST, HAS_KEEP, N, EARLY, EVICT)
    else:
        for h in tl.range(h0, h0 + HEADS, num_stages=STAGES):
            _decode_head(r_ptr, k_ptr, v_ptr, lora_ptr, vfirst_ptr, keep_ptr, w0_ptr, a0_ptr,
                         v0_ptr, kk_ptr, ka_ptr, rk_ptr, lw_ptr, lb_ptr, S_ptr, out_ptr, R, C,
                         s_sb, s_sh, decay_scale, eps, b, h, FIRST, HAS_KEEP, N, EARLY, EVICT)


@triton.jit
def _decode_head(r_ptr, k_ptr, v_ptr, lora_ptr, vfirst_ptr, keep_ptr,
                 w0_ptr, a0_ptr, v0_ptr, kk_ptr, ka_ptr, rk_ptr, lw_ptr, lb_ptr,
                 S_ptr, out_ptr, R, C, s_sb, s_sh, decay_scale, eps, b, h,
                 FIRST: tl.constexpr, HAS_KEEP: tl.constexpr, N: tl.constexpr,
                 EARLY: tl.constexpr, EVICT: tl.constexpr):
    """Head h of row b: its time mix from the products' outputs to the output product's input."""
    j = tl.arange(0, N)  # key channels (columns of S)
    i = j  # value channels (rows of S): the same range, the whole head
    cj = h * N + j
    ci = h * N + i
    oj = b * C + cj
    oi = b * C + ci
    s_ptrs = S_ptr + b * s_sb + h * s_sh + i[:, None] * N + j[None, :]
    if EARLY:  # (benchmark variant) the state's load issued before the vector work
        s = tl.load(s_ptrs, eviction_policy=EVICT).to(tl.float32)
    # --- pre_wkv, along the key channels j ---
    k = tl.load(k_ptr + oj).to(tl.float32)
    r = tl.load(r_ptr + oj).to(tl.float32)
    w, a, kk, kp = decay_terms(k, tl.load(lora_ptr + R * C + oj).to(tl.float32),
                               tl.load(lora_ptr + 2 * R * C + oj).to(tl.float32),
                               tl.load(w0_ptr + cj).to(tl.float32),
                               tl.load(a0_ptr + cj).to(tl.float32), tl.load(kk_ptr + cj),
                               tl.load(ka_ptr + cj), decay_scale)
    kap = kk / tl.maximum(tl.sqrt(tl.sum(kk * kk, axis=0)), 1e-12)
    bonus = tl.sum(r * kp * tl.load(rk_ptr + cj), axis=0)
    # the value, along the value channels i
    v = tl.load(v_ptr + oi).to(tl.float32)
    if not FIRST:
        v = mixed_value(v, tl.load(lora_ptr + oi).to(tl.float32),
                        tl.load(vfirst_ptr + oi).to(tl.float32),
                        tl.load(v0_ptr + ci).to(tl.float32), FIRST)
    if HAS_KEEP:
        keep = tl.load(keep_ptr + b + j * 0) != 0  # the row's flag, along the head's channels
        w = tl.where(keep, w, 1.0)
        kp = tl.where(keep, kp, 0.0)
        kap = tl.where(keep, kap, 0.0)
        v = tl.where(keep, v, 0.0)
    # --- the WKV step on the head's state (loaded here: loading it first, to overlap the
    # vector work above, made the kernel 8 % slower on the H200 at batch 256, fp16 state) ---
    if not EARLY:
        s = tl.load(s_ptrs, eviction_policy=EVICT).to(tl.float32)
    sk = tl.sum(s * kap[None, :], axis=1)
    s = s * w[None, :] - sk[:, None] * (kap * a)[None, :] + v[:, None] * kp[None, :]
    tl.store(s_ptrs, s.to(S_ptr.dtype.element_ty), eviction_policy=EVICT)
    y = tl.sum(s * r[None, :], axis=1)
    y = y.to(out_ptr.dtype.element_ty).to(tl.float32)  # the three-kernel path stores y so
    # --- post_wkv: GroupNorm of the head, + bonus * v, times the gate ---
    mean = tl.sum(y, axis=0) / N
    d = y - mean
    var = tl.sum(d * d, axis=0) / N
    yn = d * (1.0 / tl.sqrt(var + eps)) * tl.load(lw_ptr + ci) + tl.load(lb_ptr + ci)
    g = tl.load(lora_ptr + 3 * R * C + oi).to(tl.float32)
    tl.store(out_ptr + oi, ((yn + bonus * v) * g).to(out_ptr.dtype.element_ty))


SMALL_ROWS = 16  # up to this many rows: the default warps (4 / 8 for fp16 / fp32 state)
# launch options above SMALL_ROWS replaced for a benchmark of the whole step (`server.bench
# decode --time-mix`): the kernel's ranking of variants alone (`server.bench large`) did not
# hold in the step twice (one warp; two heads a program), for a reason not found (not its
# inputs staying in L2 alone: the same ranking with each layer's own inputs)
STEP_VARIANT: dict = {}


def time_mix_decode(S: Tensor, r: Tensor, k: Tensor, v: Tensor, lora: Tensor,
                    v_first: Tensor | None, keep: Tensor | None, w0: Tensor, a0: Tensor,
                    v0: Tensor | None, k_k: Tensor, k_a: Tensor, r_k: Tensor, ln_w: Tensor,
                    ln_b: Tensor, decay_scale: float, eps: float, **variant) -> Tensor:
    """S: [B, H, N, N] fp32|fp16 state (in place); r, k, v: [B, C] run dtype; lora: [4, B, C]
    (v, w, a LoRA outputs and the gate); v_first: [B, C] or None (first layer); keep: [B] int8
    or None; w0, a0, v0: [C] run dtype; k_k, k_a, r_k, ln_w, ln_b: [C] fp32.
    Returns the gated, normalised WKV output [B, C] in r's dtype (the output product's input);
    ``variant``: launch options for benchmarks (num_warps, EARLY, EVICT, HEADS, STAGES)."""
    B, C = r.shape
    H = C // HEAD
    assert S.shape == (B, H, HEAD, HEAD) and S.stride(-1) == 1 and S.stride(-2) == HEAD
    assert lora.is_contiguous() and lora.shape == (4, B, C)
    first = v_first is None
    out = torch.empty_like(r)
    opts = dict(num_warps=HEAD * S.element_size() // 32)
    if B > SMALL_ROWS:
        opts = dict(num_warps=2 if S.element_size() == 2 else 1, EVICT="evict_first")
        opts.update(STEP_VARIANT)
    opts.update(pdl.launch_options(r.device, B), **variant)
    assert H % opts.get("HEADS", 1) == 0, (H, opts)  # a program's heads: every head once
    _decode_kernel[(B * H // opts.get("HEADS", 1),)](
        r, k, v, lora, v if first else v_first, keep if keep is not None else r, w0, a0,
        w0 if first else v0, k_k, k_a, r_k, ln_w, ln_b, S, out, B, C, H, S.stride(0),
        S.stride(1), decay_scale, eps, FIRST=first, HAS_KEEP=keep is not None, N=HEAD, **opts)
    return out


@triton.jit(do_not_specialize=["T"])
def _seq_kernel(r_ptr, k_ptr, v_ptr, lora_ptr, vfirst_ptr, keep_ptr, norm_ptr,
                w0_ptr, a0_ptr, v0_ptr, kk_ptr, ka_ptr, S_ptr, y_ptr, T, R, C, H, s_sb, s_sh,
                decay_scale, FIRST: tl.constexpr, HAS_KEEP: tl.constexpr, N: tl.constexpr):
    """One program per (sequence, head): the WKV's T tokens one after another, the head's
    state in registers throughout (``wkv_triton._recurrent_kernel``'s token loop over a whole
    head), each token's decay, rate, keys and value computed from the products' outputs as
    pre_wkv computes them, the key's norm (a sum over the head) read from ``norm_ptr`` ([R, H]:
    ``pre_wkv(norms_only=True)``). Token t + 1's vectors are loaded while t is computed."""
    pid = tl.program_id(0)
    b = (pid // H).to(tl.int64)
    h = pid % H
    j = tl.arange(0, N)  # key channels; the value channels (rows of S) are the same range
    cj = h * N + j
    s_ptrs = S_ptr + b * s_sb + h * s_sh + j[:, None] * N + j[None, :]
    w0 = tl.load(w0_ptr + cj).to(tl.float32)  # the head's parameters, every token's
    a0 = tl.load(a0_ptr + cj).to(tl.float32)
    v0 = tl.load(v0_ptr + cj).to(tl.float32)  # (w0 again in the first layer: unused)
    kkw, kaw = tl.load(kk_ptr + cj), tl.load(ka_ptr + cj)
    p0 = b * T  # the sequence's first row
    k_n, r_n, wl_n, al_n, v_n, vl_n, vf_n, nrm_n, keep_n = _seq_loads(
        r_ptr, k_ptr, v_ptr, lora_ptr, vfirst_ptr, keep_ptr, norm_ptr, p0, 0, T, R, C, H, h,
        cj, FIRST, HAS_KEEP)
    s = tl.load(s_ptrs).to(tl.float32)
    for t in range(T):
        k, r, wl, al, v, vl, vf, nrm, keep = k_n, r_n, wl_n, al_n, v_n, vl_n, vf_n, nrm_n, keep_n
        k_n, r_n, wl_n, al_n, v_n, vl_n, vf_n, nrm_n, keep_n = _seq_loads(
            r_ptr, k_ptr, v_ptr, lora_ptr, vfirst_ptr, keep_ptr, norm_ptr, p0, t + 1, T, R, C,
            H, h, cj, FIRST, HAS_KEEP)
        w, a, kk, kp = decay_terms(k, wl, al, w0, a0, kkw, kaw, decay_scale)
        kap = kk / nrm
        v = mixed_value(v, vl, vf, v0, FIRST)
        if HAS_KEEP:
            w = tl.where(keep, w, 1.0)
            kp = tl.where(keep, kp, 0.0)
            kap = tl.where(keep, kap, 0.0)
            v = tl.where(keep, v, 0.0)
        sk = tl.sum(s * kap[None, :], axis=1)
        s = s * w[None, :] - sk[:, None] * (kap * a)[None, :] + v[:, None] * kp[None, :]
        y = tl.sum(s * r[None, :], axis=1)
        tl.store(y_ptr + (p0 + t) * C + cj, y.to(y_ptr.dtype.element_ty))
    tl.store(s_ptrs, s.to(S_ptr.dtype.element_ty))


@triton.jit
def _seq_loads(r_ptr, k_ptr, v_ptr, lora_ptr, vfirst_ptr, keep_ptr, norm_ptr, p0, t, T, R, C,
               H, h, cj, FIRST: tl.constexpr, HAS_KEEP: tl.constexpr):
    """Token t's vectors (row p0 + t) of head h at its channels cj (fp32): k, r, the w and a
    LoRAs, v, the value LoRA and v_first (v again in the first layer), the key's norm and the
    keep flag; zeros where t >= T (past the sequence's end: never used)."""
    o = (p0 + t) * C + cj
    m = (cj * 0 + t) < T
    k = tl.load(k_ptr + o, mask=m, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + o, mask=m, other=0.0).to(tl.float32)
    wl = tl.load(lora_ptr + R * C + o, mask=m, other=0.0).to(tl.float32)
    al = tl.load(lora_ptr + 2 * R * C + o, mask=m, other=0.0).to(tl.float32)
    v = tl.load(v_ptr + o, mask=m, other=0.0).to(tl.float32)
    vl, vf = v, v
    if not FIRST:
        vl = tl.load(lora_ptr + o, mask=m, other=0.0).to(tl.float32)
        vf = tl.load(vfirst_ptr + o, mask=m, other=0.0).to(tl.float32)
    nrm = tl.load(norm_ptr + (p0 + t) * H + h + cj * 0, mask=m, other=1.0)
    keep = m
    if HAS_KEEP:
        keep = tl.load(keep_ptr + p0 + t + cj * 0, mask=m, other=1) != 0
    return k, r, wl, al, v, vl, vf, nrm, keep


def seq_programs_fill(B: int, H: int, device: torch.device) -> bool:
    """Whether ``time_mix_seq``'s token loop (a program a sequence and head) has enough programs
    for the GPU: two an SM. With fewer, ``wkv_triton``'s token loop splits a head's rows over
    more programs (and at one an SM the chunked form takes over: ``prefer_chunked``)."""
    return B * H >= 2 * _sm_count(device)


def time_mix_seq(S: Tensor, r: Tensor, k: Tensor, v: Tensor, lora: Tensor,
                 v_first: Tensor | None, keep: Tensor | None, w0: Tensor, a0: Tensor,
                 v0: Tensor | None, k_k: Tensor, k_a: Tensor, r_k: Tensor, ln_w: Tensor,
                 ln_b: Tensor, decay_scale: float, eps: float, T: int,
                 num_warps: int = 4) -> Tensor:
    """``time_mix_decode`` for a prefill pass of B sequences of T tokens: r, k, v: [B·T, C]
    (row b·T + t: token t of sequence b); lora: [4, B·T, C]; v_first: [B·T, C] or None;
    keep: [B·T] int8 or None (False: an identity step); S: [B, H, N, N], in place; the rest as
    there. Returns the gated, normalised WKV output [B·T, C] in r's dtype: pre_wkv, the WKV's
    token loop (``wkv_seq_triton``) and post_wkv, the same operations, without pre_wkv's five
    [B·T, C] fp32 outputs in memory (~51 KB a token at 2.9B: a batched pass's largest). Three
    launches: each head's key norm and bonus ([B·T, H]), the loop (computing the rest of
    pre_wkv per channel, as it goes), post_wkv mixing the value again."""
    R, C = r.shape
    H = C // HEAD
    B = R // T
    assert B * T == R, (R, T)
    assert lora.is_contiguous() and lora.shape == (4, R, C)
    assert all(x.stride() == (C, 1) for x in (r, k, v) if x is not None)
    assert v_first is None or v_first.stride() == (C, 1)
    norm, bonus = pre_wkv(r, k, v, lora, v_first, keep, w0, a0, v0, k_k, k_a, r_k, H,
                          norms_only=True)
    St = _state_view(S, B, H)  # (S itself unless its [N, N] blocks are not contiguous)
    y = torch.empty_like(r)
    first = v_first is None
    _seq_kernel[(B * H,)](
        r, k, v, lora, v if first else v_first, keep if keep is not None else r, norm, w0, a0,
        w0 if first else v0, k_k, k_a, St, y, T, R, C, H, St.stride(0), St.stride(1),
        decay_scale, FIRST=first, HAS_KEEP=keep is not None, N=HEAD, num_warps=num_warps)
    if St is not S:
        S.copy_(St)
    return post_wkv(y, v, lora[3], bonus, ln_w, ln_b, eps, r.dtype,
                    raw=(lora[0], v_first, w0 if first else v0, keep))
