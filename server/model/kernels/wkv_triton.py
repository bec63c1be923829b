"""Triton kernels for the WKV-7 recurrence (contract and math: `wkv_torch.py`).

All math is fp32 whatever the storage dtypes (S: fp32 or fp16; r, w, k, v, kappa, a: fp16, bf16
or fp32; w is the decay itself, its log is taken in the kernel). Three kernels:

* `_recurrent_kernel`: one program per (batch, head, block of BI value rows) holds its rows of S
  in registers and runs T tokens one after another, loading token t + 1 while computing t.
  With T = 1 it is the decode step: S is read and written exactly once (memory-bound; BI and the
  warp count are set so that small batches still fill the GPU). It also serves short prompts.
* `_chunk_prep_kernel` + `_chunk_scan_kernel`: prefill in the exact chunked (WY) form, CHUNK
  tokens at a time. The first kernel computes every chunk's state-independent tiles in parallel
  (grid: heads × chunks); the second, one program per (batch, head, row block) with S in
  registers, walks the chunks: y = Q s^T + Yc, s <- s·diag(e) + (W s^T)^T Bt + D, i.e. three
  small matrix products per chunk. Why: a single long prompt (B = 1, 40 heads) gives only a few
  hundred programs, so the token-by-token loop is bound by per-token latency (~0.6 µs a token
  on an H200, measured); chunking divides the serial depth by CHUNK and moves the rest of the
  work to a fully parallel kernel. A first version that did the whole chunk inside the serial
  loop was slower than the token loop (the intra-chunk products sat on the critical path).
  Products use tl.dot with input_precision "tf32x3" (fp32-level error, measured ~1e-6 relative,
  on tensor cores) or "ieee".

Chunk form (`wkv_torch._chunk_prep`), per chunk with start state S0 (rows: value i) and per-channel
log decays g_t = sum_{u<=t} log w_u (g_{t-1} excludes t, gC = g at the chunk end); with
a_t = -kappa_t, b_t = kappa_t ⊙ a_t and x_t = S_{t-1}·a_t:
    X = (I - A_ab)^-1 (Ã S0^T + A_ak V) = W S0^T + U,  Ã[t] = a_t ⊙ exp(g_{t-1})
    Y = R̃ S0^T + A_rb X + A_rk V = Q S0^T + Yc,        R̃[t] = r_t ⊙ exp(g_t)
    S_C = S0 diag(exp gC) + X^T Bt + V^T Kt = S0 diag(exp gC) + (W S0^T)^T Bt + D,
with Bt = b ⊙ exp(gC - g), Kt = k ⊙ exp(gC - g), D = U^T Bt + V^T Kt, and
A_pq[t, u] = sum_j p_t[j] q_u[j] exp(g'_t[j] - g_u[j]) (g' = g_{t-1} for p = a, g_t for p = r),
for u < t (A_ab, A_ak) or u <= t (A_rb, A_rk). Each exp factor is split around the mid-chunk
reference gC/2 so neither half overflows for decays down to about exp(-5) per token at CHUNK 32,
exp(-10) at 16 (RWKV-7's decay is >= exp(-0.61)). (I - A_ab)^-1 = (I + L)(I + L^2)(I + L^4)...
exactly, as L = A_ab is strictly lower triangular (L^CHUNK = 0). A ragged last chunk is padded
with identity steps (w = 1, the rest 0). Workspace: 32 KB of fp32 per (head, chunk)."""

import functools

import torch
import triton
import triton.language as tl
from torch import Tensor

CHUNK = 16
N_HEAD = 64


@triton.jit
def _load_token(r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr, o, t, T, i, j):
    """Raw (storage-dtype) vectors of token t at offset o; an identity step if t >= T."""
    ok = (j * 0 + t) < T
    oki = (i * 0 + t) < T
    return (tl.load(r_ptr + o + j, mask=ok, other=0.0),
            tl.load(w_ptr + o + j, mask=ok, other=1.0),
            tl.load(k_ptr + o + j, mask=ok, other=0.0),
            tl.load(v_ptr + o + i, mask=oki, other=0.0),
            tl.load(kap_ptr + o + j, mask=ok, other=0.0),
            tl.load(a_ptr + o + j, mask=ok, other=0.0))


@triton.jit
def _mid_points(mid_ptr, MID: tl.constexpr):
    """The export positions (``wkv_chunk``'s ``mid``): up to two, -1 where none."""
    m0 = -1
    m1 = -1
    if MID >= 1:
        m0 = tl.load(mid_ptr)
    if MID >= 2:
        m1 = tl.load(mid_ptr + 1)
    return m0, m1


@triton.jit
def _mid_store(M_ptr, m_sk, s_off, s, done, m0, m1, MID: tl.constexpr):
    """s (the state after ``done`` tokens) into M's row k where ``done`` is export point k."""
    if MID >= 1:
        if done == m0:
            tl.store(M_ptr + s_off, s.to(M_ptr.dtype.element_ty))
    if MID >= 2:
        if done == m1:
            tl.store(M_ptr + m_sk + s_off, s.to(M_ptr.dtype.element_ty))


@triton.jit
def _recurrent_kernel(S_ptr, r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr, y_ptr, mid_ptr, M_ptr,
                      T, H, s_sb, s_sh, x_sb, x_st, m_sk,
                      N: tl.constexpr, BI: tl.constexpr, MID: tl.constexpr):
    pid_bh = tl.program_id(0)
    b = (pid_bh // H).to(tl.int64)
    h = pid_bh % H
    i = tl.program_id(1) * BI + tl.arange(0, BI)          # value rows of this program
    j = tl.arange(0, N)                                    # key columns
    s_off = b * s_sb + h * s_sh + i[:, None] * N + j[None, :]
    s_ptrs = S_ptr + s_off
    base = b * x_sb + h * N
    # token t's vectors are loaded during step t - 1 (their latency hides behind its math)
    r_n, w_n, k_n, v_n, kap_n, a_n = _load_token(r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr,
                                                 base, 0, T, i, j)
    s = tl.load(s_ptrs).to(tl.float32)                     # [BI, N]
    m0, m1 = _mid_points(mid_ptr, MID)  # the states after m0 and m1 tokens go to M too
    for t in range(T):
        r, w, k = r_n.to(tl.float32), w_n.to(tl.float32), k_n.to(tl.float32)
        v, kap, a = v_n.to(tl.float32), kap_n.to(tl.float32), a_n.to(tl.float32)
        o = base + t * x_st
        r_n, w_n, k_n, v_n, kap_n, a_n = _load_token(r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr,
                                                     o + x_st, t + 1, T, i, j)
        sk = tl.sum(s * kap[None, :], axis=1)              # S·kappa: [BI]
        s = s * w[None, :] - sk[:, None] * (kap * a)[None, :] + v[:, None] * k[None, :]
        y = tl.sum(s * r[None, :], axis=1)                 # [BI]
        tl.store(y_ptr + o + i, y.to(y_ptr.dtype.element_ty))
        _mid_store(M_ptr, m_sk, s_off, s, t + 1, m0, m1, MID)
    tl.store(s_ptrs, s.to(S_ptr.dtype.element_ty))


@triton.jit
def _load_chunk(r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr, base, c0, T, x_st, i, j, t):
    """Raw [C, N] tiles (v: [C, BV]) of tokens c0 .. c0 + C; identity steps past T."""
    tt = c0 + t
    m = (tt < T)[:, None]
    o = base + tt[:, None].to(tl.int64) * x_st
    return (tl.load(r_ptr + o + j[None, :], mask=m, other=0.0),
            tl.load(w_ptr + o + j[None, :], mask=m, other=1.0),
            tl.load(k_ptr + o + j[None, :], mask=m, other=0.0),
            tl.load(v_ptr + o + i[None, :], mask=m, other=0.0),
            tl.load(kap_ptr + o + j[None, :], mask=m, other=0.0),
            tl.load(a_ptr + o + j[None, :], mask=m, other=0.0))


# T and NC are not specialised: Triton compiles a variant for an integer argument equal to 1
# (or divisible by 16), and the one-chunk variant of the scan gave other bits for the same
# chunk (fp16 state, measured): a prompt's bits must not depend on how long its pass is
@triton.jit(do_not_specialize=["T", "NC"])
def _chunk_prep_kernel(r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr, wqb_ptr, yc_ptr, d_ptr, e_ptr,
                       T, H, NC, x_sb, x_st,
                       N: tl.constexpr, C: tl.constexpr, LOG2C: tl.constexpr, PREC: tl.constexpr,
                       INV_PREC: tl.constexpr):
    """State-independent part of chunk program_id(1) of head program_id(0) (`_chunk_prep`);
    INV_PREC: the precision of the [C, C] squarings of the inverse (PREC as served)."""
    pid_bh = tl.program_id(0)
    c = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = pid_bh % H
    j = tl.arange(0, N)
    t = tl.arange(0, C)
    r, w, k, v, kap, a = _load_chunk(r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr,
                                     b * x_sb + h * N, c * C, T, x_st, j, j, t)
    r, lw, k, v = r.to(tl.float32), tl.log(w.to(tl.float32)), k.to(tl.float32), v.to(tl.float32)
    kap = kap.to(tl.float32)
    ka = kap * a.to(tl.float32)                            # all [C, N]
    g = tl.cumsum(lw, axis=0)
    g_prev = g - lw
    g_end = tl.sum(lw, axis=0)                             # [N]
    ref = 0.5 * g_end[None, :]
    e_in = tl.exp(ref - g)
    a_t = -kap * tl.exp(g_prev - ref)
    r_t = r * tl.exp(g - ref)
    b_t = ka * e_in
    k_t = k * e_in
    strict = t[:, None] > t[None, :]                       # u < t
    incl = t[:, None] >= t[None, :]                        # u <= t
    A_ab = tl.where(strict, tl.dot(a_t, tl.trans(b_t), input_precision=PREC), 0.0)
    A_ak = tl.where(strict, tl.dot(a_t, tl.trans(k_t), input_precision=PREC), 0.0)
    A_rb = tl.where(incl, tl.dot(r_t, tl.trans(b_t), input_precision=PREC), 0.0)
    A_rk = tl.where(incl, tl.dot(r_t, tl.trans(k_t), input_precision=PREC), 0.0)
    P = tl.where(t[:, None] == t[None, :], 1.0, 0.0) + A_ab   # (I - A_ab)^-1 by squaring
    Lp = A_ab
    for _ in tl.static_range(LOG2C - 1):
        Lp = tl.dot(Lp, Lp, input_precision=INV_PREC)
        P = P + tl.dot(P, Lp, input_precision=INV_PREC)
    W = tl.dot(P, -kap * tl.exp(g_prev), input_precision=PREC)                  # [C, N]
    U = tl.dot(P, tl.dot(A_ak, v, input_precision=PREC), input_precision=PREC)  # [C, N]
    Q = tl.dot(A_rb, W, r * tl.exp(g), input_precision=PREC)
    Yc = tl.dot(A_rk, v, tl.dot(A_rb, U, input_precision=PREC), input_precision=PREC)
    tail = tl.exp(g_end[None, :] - g)                      # decay after t to the chunk end
    Bt = ka * tail
    D = tl.dot(tl.trans(v), k * tail, input_precision=PREC)
    D = tl.dot(tl.trans(U), Bt, D, input_precision=PREC)  # [N, N]
    wid = pid_bh.to(tl.int64) * NC + c
    cn = t[:, None] * N + j[None, :]
    tl.store(wqb_ptr + wid * 3 * C * N + cn, W)
    tl.store(wqb_ptr + wid * 3 * C * N + C * N + cn, Q)
    tl.store(wqb_ptr + wid * 3 * C * N + 2 * C * N + cn, Bt)
    tl.store(yc_ptr + wid * C * N + cn, Yc)
    tl.store(d_ptr + wid * N * N + j[:, None] * N + j[None, :], D)
    tl.store(e_ptr + wid * N + j, tl.exp(g_end))


@triton.jit
def _load_prep(wqb_ptr, yc_ptr, d_ptr, e_ptr, wid, ok, i, j, t, N: tl.constexpr, C: tl.constexpr):
    """Chunk wid's prepared tiles (W, Q, Bt: [C, N]; Yc: [C, BV]; D: [BV, N]; e: [N]) if ok."""
    okc = (t[:, None] * 0 + ok) != 0
    okr = (i[:, None] * 0 + ok) != 0
    cn = t[:, None] * N + j[None, :]
    base = wqb_ptr + wid * 3 * C * N
    return (tl.load(base + cn, mask=okc, other=0.0),
            tl.load(base + C * N + cn, mask=okc, other=0.0),
            tl.load(base + 2 * C * N + cn, mask=okc, other=0.0),
            tl.load(yc_ptr + wid * C * N + t[:, None] * N + i[None, :], mask=okc, other=0.0),
            tl.load(d_ptr + wid * N * N + i[:, None] * N + j[None, :], mask=okr, other=0.0),
            tl.load(e_ptr + wid * N + j, mask=(j * 0 + ok) != 0, other=0.0))


@triton.jit(do_not_specialize=["T", "NC"])
def _chunk_scan_kernel(S_ptr, wqb_ptr, yc_ptr, d_ptr, e_ptr, y_ptr, mid_ptr, M_ptr,
                       T, H, NC, s_sb, s_sh, x_sb, x_st, m_sk,
                       N: tl.constexpr, BV: tl.constexpr, C: tl.constexpr, PREC: tl.constexpr,
                       ROUND: tl.constexpr, MID: tl.constexpr):
    """Chunk after chunk for BV value rows of one head:
    y = Q s^T + Yc, then s <- s·diag(e) + (W s^T)^T Bt + D (ROUND: s rounded to the state's
    dtype after each chunk, as if stored there). MID (0-2, one sequence): the state after
    mid_ptr[k] tokens (a multiple of C) is stored into row k of M (laid out as S) as well."""
    pid_bh = tl.program_id(0)
    b = (pid_bh // H).to(tl.int64)
    h = pid_bh % H
    i = tl.program_id(1) * BV + tl.arange(0, BV)          # value rows of this program
    j = tl.arange(0, N)
    t = tl.arange(0, C)
    s_off = b * s_sb + h * s_sh + i[:, None] * N + j[None, :]
    s_ptrs = S_ptr + s_off
    wid = pid_bh.to(tl.int64) * NC
    base = b * x_sb + h * N
    # chunk c's tiles are loaded during chunk c - 1
    W_n, Q_n, B_n, Y_n, D_n, e_n = _load_prep(wqb_ptr, yc_ptr, d_ptr, e_ptr, wid, NC > 0,
                                              i, j, t, N, C)
    s = tl.load(s_ptrs).to(tl.float32)                     # [BV, N]
    m0, m1 = _mid_points(mid_ptr, MID)
    for c in range(NC):
        W, Q, Bt, Yc, D, e = W_n, Q_n, B_n, Y_n, D_n, e_n
        W_n, Q_n, B_n, Y_n, D_n, e_n = _load_prep(wqb_ptr, yc_ptr, d_ptr, e_ptr, wid + c + 1,
                                                  c + 1 < NC, i, j, t, N, C)
        sT = tl.trans(s)                                   # [N, BV]
        y = tl.dot(Q, sT, Yc, input_precision=PREC)        # [C, BV]
        tt = c * C + t
        o = base + tt[:, None].to(tl.int64) * x_st + i[None, :]
        tl.store(y_ptr + o, y.to(y_ptr.dtype.element_ty), mask=(tt < T)[:, None])
        Xw = tl.dot(W, sT, input_precision=PREC)           # [C, BV]
        s = tl.dot(tl.trans(Xw), Bt, s * e[None, :] + D, input_precision=PREC)
        if ROUND:
            s = s.to(S_ptr.dtype.element_ty).to(tl.float32)
        _mid_store(M_ptr, m_sk, s_off, s, (c + 1) * C, m0, m1, MID)
    tl.store(s_ptrs, s.to(S_ptr.dtype.element_ty))


@functools.cache
def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 132  # Triton interpreter on the CPU (tests)
    return torch.cuda.get_device_properties(device).multi_processor_count


def _rows_per_program(n_bh: int, device: torch.device, smallest: int) -> int:
    """Largest row block (64 .. smallest) that still gives >= 2 programs per SM."""
    rows = N_HEAD
    while rows > smallest and n_bh * (N_HEAD // rows) < 2 * _sm_count(device):
        rows //= 2
    return rows


def prefer_chunked(B: int, T: int, H: int, device: torch.device,
                   split_invariant: bool = False) -> bool:
    """Whether the chunked form beats the token loop. Measured on an H200 (H = 40): the chunked
    form is 2.7x faster at B = 1, T = 4096, the token loop 1.7x faster at B = 64, T = 512; the
    token loop is latency-bound only while B·H programs leave the GPU idle (about B·H <= #SMs).
    ``split_invariant``: below 64 tokens too (``wkv_chunk``'s option)."""
    return (split_invariant or T >= 64) and B * H <= _sm_count(device)


def _state_view(S: Tensor, B: int, H: int) -> Tensor:
    """S itself if each [N, N] block is contiguous, else a contiguous copy (copied back after)."""
    assert S.shape == (B, H, N_HEAD, N_HEAD), S.shape
    return S if S.stride(-1) == 1 and S.stride(-2) == N_HEAD else S.contiguous()


def wkv_step_triton(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
                    kappa: Tensor, a: Tensor, rows: int | None = None,
                    warps: int | None = None) -> Tensor:
    """Decode step. S: [B, H, N, N] fp32|fp16 (in place); r..a: [B, H, N] -> y [B, H, N].
    rows / warps: value rows and warps per program. Default (measured best on an H200 within
    ~6%): 64 bytes of state per thread; fp16 state 16 rows, fp32 as many rows (<= 64) as
    leave >= 2 programs per SM."""
    B, H, N = r.shape
    if rows is None:
        rows = 16 if S.element_size() == 2 else _rows_per_program(B * H, r.device, 16)
    warps = warps or max(1, rows * S.element_size() // 32)
    xs = tuple(x.unsqueeze(1) for x in (r, w, k, v, kappa, a))
    return wkv_seq_triton(S, *xs, rows=rows, warps=warps).squeeze(1)


def _mid_args(St: Tensor, mid: Tensor | None, S_mid: Tensor | None) -> tuple:
    """The kernels' (mid_ptr, M, MID) for ``mid``/``S_mid`` (``wkv_chunk``): M's rows laid out
    as the state view St's one row (S_mid itself, or a copy that ``_mid_back`` copies back)."""
    if mid is None or S_mid is None:
        return St, St, 0
    K = mid.shape[0]
    if St.shape[0] != 1 or not 0 < K <= 2 or S_mid.shape[0] != K:
        raise ValueError(f"wkv export: one sequence and 1-2 points with a state row each "
                         f"(got {St.shape[0]} sequences, {K} points, {S_mid.shape[0]} rows)")
    if S_mid.dtype == St.dtype and S_mid.stride()[1:] == St.stride()[1:]:
        return mid, S_mid, K
    return mid, torch.empty((K, *St.shape[1:]), dtype=St.dtype, device=St.device).copy_(S_mid), K


def _mid_back(M: Tensor, S_mid: Tensor | None) -> None:
    if S_mid is not None and M is not S_mid:
        S_mid.copy_(M)


def wkv_seq_triton(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
                   kappa: Tensor, a: Tensor, rows: int | None = None,
                   warps: int | None = None, mid: Tensor | None = None,
                   S_mid: Tensor | None = None) -> Tensor:
    """T tokens one at a time, S in registers. S: [B, H, N, N]; r..a: [B, T, H, N].
    ``mid``, ``S_mid``: see ``kernels.wkv_chunk``."""
    B, T, H, N = r.shape
    rows = rows or _rows_per_program(B * H, r.device, 8)
    xs = tuple(x.contiguous() for x in (r, w, k, v, kappa, a))
    y = torch.empty_like(xs[0])
    St = _state_view(S, B, H)
    mid_ptr, M, n_mid = _mid_args(St, mid, S_mid)
    _recurrent_kernel[(B * H, N // rows)](St, *xs, y, mid_ptr, M, T, H, St.stride(0),
                                          St.stride(1), T * H * N, H * N, M.stride(0), N=N,
                                          BI=rows, MID=n_mid,
                                          num_warps=warps or max(1, rows // 16))
    if St is not S:
        S.copy_(St)
    _mid_back(M, S_mid if n_mid else None)
    return y


def chunk_prep(r: Tensor, w: Tensor, k: Tensor, v: Tensor, kappa: Tensor, a: Tensor,
               chunk: int = CHUNK, precision: str = "tf32x3", warps: int = 4,
               inv_precision: str | None = None) -> tuple[Tensor, ...]:
    """First kernel of the chunked form: every chunk's state-independent tiles, in parallel.
    r..a: [B, T, H, N] -> (WQB [BH, nc, 3, C, N], Yc [BH, nc, C, N], D [BH, nc, N, N],
    e [BH, nc, N]), fp32."""
    B, T, H, N = r.shape
    xs = tuple(x.contiguous() for x in (r, w, k, v, kappa, a))
    nc = triton.cdiv(T, chunk)
    f32 = dict(device=r.device, dtype=torch.float32)
    ws = (torch.empty(B * H, nc, 3, chunk, N, **f32), torch.empty(B * H, nc, chunk, N, **f32),
          torch.empty(B * H, nc, N, N, **f32), torch.empty(B * H, nc, N, **f32))
    _chunk_prep_kernel[(B * H, nc)](*xs, *ws, T, H, nc, T * H * N, H * N, N=N, C=chunk,
                                    LOG2C=chunk.bit_length() - 1, PREC=precision,
                                    INV_PREC=inv_precision or precision, num_warps=warps)
    return ws


def chunk_scan(S: Tensor, ws: tuple[Tensor, ...], T: int, out_dtype: torch.dtype,
               rows: int | None = None, warps: int = 4, precision: str = "tf32x3",
               round_chunks: bool = False, mid: Tensor | None = None,
               S_mid: Tensor | None = None) -> Tensor:
    """Second kernel: chunk after chunk from S [B, H, N, N] (in place) -> y [B, T, H, N].
    ``round_chunks``: a half-precision S is rounded at every chunk's end, as it is where a pass
    ends (the same bits however the sequence is cut into passes at multiples of the chunk).
    ``mid``, ``S_mid``: see ``kernels.wkv_chunk``."""
    B, H, N = S.shape[0], S.shape[1], S.shape[2]
    nc, chunk = ws[0].shape[1], ws[0].shape[3]
    rows = rows or 32  # measured best at B = 1 and B = 64 (H = 40)
    y = torch.empty(B, T, H, N, device=S.device, dtype=out_dtype)
    St = _state_view(S, B, H)
    mid_ptr, M, n_mid = _mid_args(St, mid, S_mid)
    _chunk_scan_kernel[(B * H, N // rows)](St, *ws, y, mid_ptr, M, T, H, nc, St.stride(0),
                                           St.stride(1), T * H * N, H * N, M.stride(0), N=N,
                                           BV=rows, C=chunk, PREC=precision, num_warps=warps,
                                           ROUND=round_chunks and S.dtype != torch.float32,
                                           MID=n_mid)
    if St is not S:
        S.copy_(St)
    _mid_back(M, S_mid if n_mid else None)
    return y


def wkv_chunk_triton(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
                     kappa: Tensor, a: Tensor, rows: int | None = None, chunk: int = CHUNK,
                     warps: int = 4, precision: str = "tf32x3",
                     round_chunks: bool = False, mid: Tensor | None = None,
                     S_mid: Tensor | None = None) -> Tensor:
    """T tokens, `chunk` at a time (WY form, two kernels). S: [B, H, N, N]; r..a: [B, T, H, N].
    precision: tl.dot's input_precision for the fp32 products ("ieee" or "tf32x3");
    round_chunks, mid, S_mid: see ``chunk_scan``."""
    if r.shape[1] == 0:
        return torch.empty_like(r)
    ws = chunk_prep(r, w, k, v, kappa, a, chunk, precision)
    return chunk_scan(S, ws, r.shape[1], r.dtype, rows, warps, precision, round_chunks,
                      mid, S_mid)
