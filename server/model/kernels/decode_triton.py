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

`time_mix_seq` does the same for a batched prefill pass of many sequences (at least four
(sequence, head) items an SM): the token loop of `wkv_triton` with a chunk's pre_wkv and
post_wkv around it in one launch, a chunk at a time through a per-program scratch, instead of
pre_wkv's five [rows, C] fp32 outputs in memory (docs/performance.md, session 68).
"""

import torch
import triton
import triton.language as tl
from torch import Tensor

from . import pdl
from .fused_triton import HEAD, decay_terms, mixed_value
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
                        tl.load(v0_ptr + ci).to(tl.float32))
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


@triton.jit(do_not_specialize=["T", "R", "ITEMS"])
def _seq_kernel(r_ptr, k_ptr, v_ptr, lora_ptr, vfirst_ptr, keep_ptr,
                w0_ptr, a0_ptr, v0_ptr, kk_ptr, ka_ptr, rk_ptr, lw_ptr, lb_ptr,
                S_ptr, out_ptr, scr_ptr, T, R, C, H, ITEMS, s_sb, s_sh, decay_scale, eps,
                FIRST: tl.constexpr, HAS_KEEP: tl.constexpr, N: tl.constexpr,
                TC: tl.constexpr):
    """Items (sequence b, head h) b·H + h from program_id(0) in steps of the grid: the head's
    T tokens TC at a time, its state in registers from the first to the last. A chunk's
    pre_wkv is computed for all its tokens at once ([TC, N] tiles: each value once, the
    head's sums along the tile's rows) into this program's scratch (w, k', v', kappa, a; fp32,
    L1/L2-resident), the token loop reads it back row by row and writes y (rounded to the
    output dtype, as the three-kernel path stores it) into the scratch's sixth tile, and the
    chunk's post_wkv reads that and writes the output. Barriers between the stages: the
    scratch is written and read by different threads of the program."""
    pid = tl.program_id(0)
    j = tl.arange(0, N)
    tt = tl.arange(0, TC)
    tile = tt[:, None] * N + j[None, :]
    scr = scr_ptr + pid.to(tl.int64) * (6 * TC * N)  # w, k', v', kappa, a, y: [TC, N] each
    RC = R.to(tl.int64) * C  # (a LoRA's offset in lora: 3·R·C passes 2^31 at ~280k rows)
    for item in range(pid, ITEMS, tl.num_programs(0)):
        b = (item // H).to(tl.int64)
        h = item % H
        cj = h * N + j
        s_ptrs = S_ptr + b * s_sb + h * s_sh + j[:, None] * N + j[None, :]
        w0 = tl.load(w0_ptr + cj).to(tl.float32)[None, :]  # the head's parameters
        a0 = tl.load(a0_ptr + cj).to(tl.float32)[None, :]
        v0 = tl.load(v0_ptr + cj).to(tl.float32)[None, :]  # (w0 in the first layer: unused)
        kkw, kaw = tl.load(kk_ptr + cj)[None, :], tl.load(ka_ptr + cj)[None, :]
        rkw = tl.load(rk_ptr + cj)[None, :]
        ln_w, ln_b = tl.load(lw_ptr + cj)[None, :], tl.load(lb_ptr + cj)[None, :]
        s = tl.load(s_ptrs).to(tl.float32)
        for c0 in range(0, T, TC):
            # --- pre_wkv of the chunk's tokens, [TC, N] ---
            rows = b * T + c0 + tt
            m = (c0 + tt < T)[:, None]
            o = rows[:, None] * C + cj[None, :]
            k = tl.load(k_ptr + o, mask=m, other=0.0).to(tl.float32)
            r = tl.load(r_ptr + o, mask=m, other=0.0).to(tl.float32)
            w, a, kk, kp = decay_terms(
                k, tl.load(lora_ptr + RC + o, mask=m, other=0.0).to(tl.float32),
                tl.load(lora_ptr + 2 * RC + o, mask=m, other=0.0).to(tl.float32), w0, a0,
                kkw, kaw, decay_scale)
            kap = kk / tl.maximum(tl.sqrt(tl.sum(kk * kk, axis=1)), 1e-12)[:, None]
            bonus = tl.sum(r * kp * rkw, axis=1)  # [TC]
            v = tl.load(v_ptr + o, mask=m, other=0.0).to(tl.float32)
            if not FIRST:
                v = mixed_value(v, tl.load(lora_ptr + o, mask=m, other=0.0).to(tl.float32),
                                tl.load(vfirst_ptr + o, mask=m, other=0.0).to(tl.float32), v0)
            if HAS_KEEP:
                keep = tl.load(keep_ptr + rows, mask=c0 + tt < T, other=1)[:, None] != 0
                w = tl.where(keep, w, 1.0)
                kp = tl.where(keep, kp, 0.0)
                v = tl.where(keep, v, 0.0)
                kap = tl.where(keep, kap, 0.0)
            tl.store(scr + tile, w)
            tl.store(scr + TC * N + tile, kp)
            tl.store(scr + 2 * TC * N + tile, v)
            tl.store(scr + 3 * TC * N + tile, kap)
            tl.store(scr + 4 * TC * N + tile, a)
            tl.debug_barrier()
            # --- the WKV, token by token ---
            for t in range(0, tl.minimum(TC, T - c0)):
                rt = tl.load(r_ptr + (b * T + c0 + t) * C + cj).to(tl.float32)
                wt = tl.load(scr + t * N + j)
                kt = tl.load(scr + TC * N + t * N + j)
                vt = tl.load(scr + 2 * TC * N + t * N + j)
                kapt = tl.load(scr + 3 * TC * N + t * N + j)
                at = tl.load(scr + 4 * TC * N + t * N + j)
                sk = tl.sum(s * kapt[None, :], axis=1)
                s = s * wt[None, :] - sk[:, None] * (kapt * at)[None, :] + \
                    vt[:, None] * kt[None, :]
                y = tl.sum(s * rt[None, :], axis=1)
                tl.store(scr + 5 * TC * N + t * N + j,
                         y.to(out_ptr.dtype.element_ty).to(tl.float32))
            tl.debug_barrier()
            # --- post_wkv of the chunk's tokens ---
            yc = tl.load(scr + 5 * TC * N + tile, mask=m, other=0.0)  # (past T: not written)
            mean = tl.sum(yc, axis=1) / N
            d = yc - mean[:, None]
            var = tl.sum(d * d, axis=1) / N
            yn = d * (1.0 / tl.sqrt(var + eps))[:, None] * ln_w + ln_b
            g = tl.load(lora_ptr + 3 * RC + o, mask=m, other=0.0).to(tl.float32)
            tl.store(out_ptr + o, ((yn + bonus[:, None] * v) * g).to(out_ptr.dtype.element_ty),
                     mask=m)
            tl.debug_barrier()  # (the next chunk writes the scratch again)
        tl.store(s_ptrs, s.to(S_ptr.dtype.element_ty))


def seq_programs_fill(B: int, H: int, device: torch.device) -> bool:
    """Whether a pass of B sequences (H heads) takes ``time_mix_seq``: at least four items (a
    sequence and head each) an SM. Measured on an H100 at 2.9B (session 68, call 3, against the
    three launches, two rounds): 64 x 512 the same, 16 x 1,024 2.5-3.7 % and 256 x 32 1-2 %
    slower, but 8 x 512 (2.4 items an SM) 10 % slower, its token loops' latency then exposed:
    there ``wkv_triton``'s token loop (and at one item an SM or fewer its chunked form) keeps
    the pass."""
    return B * H >= 4 * _sm_count(device)


# launch options of time_mix_seq: programs an SM (a persistent grid: the scratch is a
# program's; "grid": that many programs, for tests), tokens a chunk, warps; replaced for
# benchmarks. Measured on an H100 (session 68, call 3, seq_variants.py): 2 or 8 programs an SM
# as 4; 8 warps 1-2 % slower at 64 x 512 and 256 x 32; chunks of 32 tokens 1-3 % faster than 16
# at 64 x 512 and 16 x 1,024 (then at parity with the three launches or better); served since
# session 69, whose call 1 ran the many-items check at 32 on CUDA (bit-identical runs, within
# 2e-3 of the three launches); the model-level CUDA test at 32 has not run yet
SEQ_VARIANT = dict(per_sm=4, chunk=32, num_warps=4)


def time_mix_seq(S: Tensor, r: Tensor, k: Tensor, v: Tensor, lora: Tensor,
                 v_first: Tensor | None, keep: Tensor | None, w0: Tensor, a0: Tensor,
                 v0: Tensor | None, k_k: Tensor, k_a: Tensor, r_k: Tensor, ln_w: Tensor,
                 ln_b: Tensor, decay_scale: float, eps: float, T: int) -> Tensor:
    """``time_mix_decode`` for a prefill pass of B sequences of T tokens: r, k, v: [B·T, C]
    (row b·T + t: token t of sequence b); lora: [4, B·T, C]; v_first: [B·T, C] or None;
    keep: [B·T] int8 or None (False: an identity step); S: [B, H, N, N], in place; the rest as
    there. Returns the gated, normalised WKV output [B·T, C] in r's dtype: pre_wkv, the WKV's
    token loop (``wkv_seq_triton``) and post_wkv, the same operations in one launch, without
    pre_wkv's five [B·T, C] fp32 outputs and y in memory (~56 KB a token at 2.9B: a batched
    pass's largest): a chunk's worth in each program's scratch instead (6 x chunk x 64 fp32:
    48 KiB a program at the served 32 tokens)."""
    R, C = r.shape
    H = C // HEAD
    B = R // T
    assert B * T == R, (R, T)
    assert lora.is_contiguous() and lora.shape == (4, R, C)
    assert all(x.stride() == (C, 1) for x in (r, k, v))
    assert v_first is None or v_first.stride() == (C, 1)
    opts = SEQ_VARIANT
    chunk = opts["chunk"]
    grid = min(B * H, opts.get("grid") or opts["per_sm"] * _sm_count(r.device))
    scratch = torch.empty(grid, 6, chunk, HEAD, dtype=torch.float32, device=r.device)
    St = _state_view(S, B, H)  # (S itself unless its [N, N] blocks are not contiguous)
    out = torch.empty_like(r)
    first = v_first is None
    _seq_kernel[(grid,)](
        r, k, v, lora, v if first else v_first, keep if keep is not None else r, w0, a0,
        w0 if first else v0, k_k, k_a, r_k, ln_w, ln_b, St, out, scratch, T, R, C, H, B * H,
        St.stride(0), St.stride(1), decay_scale, eps, FIRST=first, HAS_KEEP=keep is not None,
        N=HEAD, TC=chunk, num_warps=opts["num_warps"])
    if St is not S:
        S.copy_(St)
    return out
