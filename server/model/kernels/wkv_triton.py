"""Triton kernels for the WKV-7 recurrence (contract and math: `wkv_torch.py`).

Two kernels, both fp32 inside whatever the storage dtypes (S: fp32 or fp16; r, w, k, v, kappa, a:
fp16, bf16 or fp32; w is the decay itself, its log is taken in the kernel):

* `_recurrent_kernel`: one program per (batch, head, block of BI value rows) holds its rows of S
  in registers and runs T tokens one after another. With T = 1 it is the decode step: S is read
  and written exactly once, so it runs at memory speed; BI is chosen so that small batches still
  fill the GPU. It also serves short prompts (T < CHUNK), where chunking gains nothing.
* `_chunk_kernel`: prefill. Same grid, S rows kept in registers across the whole prompt, but
  tokens are taken CHUNK = 16 at a time in the exact WY form (derivation below), so the
  sequential dependency is T / 16 chunk updates made of small matrix products instead of T
  latency-bound vector steps. Chosen over the plain register-resident loop because one long
  prompt (B = 1, 40 heads) gives only a few hundred programs, and then per-token latency, not
  bandwidth, is the limit; chunking divides the serial depth by 16. Products use
  `input_precision="ieee"` (true fp32); tf32 would cost ~1e-3 relative error.

Chunk form, per chunk with start state S0 (rows: value i) and per-channel log decays
g_t = sum_{u<=t} log w_u (g_{t-1} excludes t, gC = g at the chunk end). Writing x_t = S_{t-1}·a_t
with a_t = -kappa_t and b_t = kappa_t ⊙ a_t:
    X = (I - A_ab)^-1 (Ã S0^T + A_ak V),            Ã[t] = a_t ⊙ exp(g_{t-1})
    Y = R̃ S0^T + A_rb X + A_rk V,                    R̃[t] = r_t ⊙ exp(g_t)
    S_C = S0 diag(exp gC) + X^T (b ⊙ exp(gC - g)) + V^T (k ⊙ exp(gC - g))
where A_pq[t, u] = sum_j p_t[j] q_u[j] exp(g'_t[j] - g_u[j]) (g' = g_{t-1} for p = a, g_t for
p = r), taken for u < t (A_ab, A_ak) or u <= t (A_rb, A_rk). Each exp factor is split around
the mid-chunk reference gC/2 so that neither half overflows for decays down to about
exp(-10) per token (RWKV-7's decay is >= exp(-0.61)). (I - A_ab)^-1 = (I + L)(I + L^2)(I + L^4)
(I + L^8) exactly, as L = A_ab is strictly lower triangular (L^16 = 0). A ragged last chunk is
padded with identity steps (w = 1, the rest 0).
"""

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
    return (tl.load(r_ptr + o + j, mask=ok, other=0.0), tl.load(w_ptr + o + j, mask=ok, other=1.0),
            tl.load(k_ptr + o + j, mask=ok, other=0.0), tl.load(v_ptr + o + i, mask=oki, other=0.0),
            tl.load(kap_ptr + o + j, mask=ok, other=0.0), tl.load(a_ptr + o + j, mask=ok, other=0.0))


@triton.jit
def _recurrent_kernel(S_ptr, r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr, y_ptr,
                      T, H, s_sb, s_sh, x_sb, x_st,
                      N: tl.constexpr, BI: tl.constexpr):
    pid_bh = tl.program_id(0)
    b = (pid_bh // H).to(tl.int64)
    h = pid_bh % H
    i = tl.program_id(1) * BI + tl.arange(0, BI)          # value rows of this program
    j = tl.arange(0, N)                                    # key columns
    s_ptrs = S_ptr + b * s_sb + h * s_sh + i[:, None] * N + j[None, :]
    base = b * x_sb + h * N
    # token t's vectors are loaded during step t - 1 (their latency hides behind its math)
    r_n, w_n, k_n, v_n, kap_n, a_n = _load_token(r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr,
                                                 base, 0, T, i, j)
    s = tl.load(s_ptrs).to(tl.float32)                     # [BI, N]
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


@triton.jit
def _chunk_kernel(S_ptr, r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr, y_ptr,
                  T, H, s_sb, s_sh, x_sb, x_st,
                  N: tl.constexpr, BV: tl.constexpr, C: tl.constexpr, LOG2C: tl.constexpr,
                  PREC: tl.constexpr):
    pid_bh = tl.program_id(0)
    b = (pid_bh // H).to(tl.int64)
    h = pid_bh % H
    i = tl.program_id(1) * BV + tl.arange(0, BV)          # value rows of this program
    j = tl.arange(0, N)
    t = tl.arange(0, C)
    s_ptrs = S_ptr + b * s_sb + h * s_sh + i[:, None] * N + j[None, :]
    strict = t[:, None] > t[None, :]                       # u < t
    incl = t[:, None] >= t[None, :]                        # u <= t
    eye = tl.where(t[:, None] == t[None, :], 1.0, 0.0)    # [C, C]
    base = b * x_sb + h * N
    # chunk c's tiles are loaded during chunk c - 1
    r_n, w_n, k_n, v_n, kap_n, a_n = _load_chunk(r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr,
                                                 base, 0, T, x_st, i, j, t)
    s = tl.load(s_ptrs).to(tl.float32)                     # [BV, N]
    for c0 in range(0, T, C):
        r, lw, k = r_n.to(tl.float32), tl.log(w_n.to(tl.float32)), k_n.to(tl.float32)  # [C, N]
        v, kap = v_n.to(tl.float32), kap_n.to(tl.float32)                                # v: [C, BV]
        ka = kap * a_n.to(tl.float32)
        r_n, w_n, k_n, v_n, kap_n, a_n = _load_chunk(r_ptr, w_ptr, k_ptr, v_ptr, kap_ptr, a_ptr,
                                                     base, c0 + C, T, x_st, i, j, t)
        g = tl.cumsum(lw, axis=0)                          # [C, N]
        g_prev = g - lw
        g_end = tl.sum(lw, axis=0)                         # [N]
        ref = 0.5 * g_end[None, :]
        e_in = tl.exp(ref - g)
        a_t = -kap * tl.exp(g_prev - ref)
        r_t = r * tl.exp(g - ref)
        b_t = ka * e_in
        k_t = k * e_in
        A_ab = tl.where(strict, tl.dot(a_t, tl.trans(b_t), input_precision=PREC), 0.0)
        A_ak = tl.where(strict, tl.dot(a_t, tl.trans(k_t), input_precision=PREC), 0.0)
        A_rb = tl.where(incl, tl.dot(r_t, tl.trans(b_t), input_precision=PREC), 0.0)
        A_rk = tl.where(incl, tl.dot(r_t, tl.trans(k_t), input_precision=PREC), 0.0)
        P = eye + A_ab                                     # (I - A_ab)^-1 by squaring
        Lp = A_ab
        for _ in tl.static_range(LOG2C - 1):
            Lp = tl.dot(Lp, Lp, input_precision=PREC)
            P = P + tl.dot(P, Lp, input_precision=PREC)
        sT = tl.trans(s)                                   # [N, BV]
        X = tl.dot(-kap * tl.exp(g_prev), sT, input_precision=PREC)
        X = tl.dot(A_ak, v, X, input_precision=PREC)
        X = tl.dot(P, X, input_precision=PREC)             # [C, BV]: x_t = S_{t-1}·a_t
        y = tl.dot(r * tl.exp(g), sT, input_precision=PREC)
        y = tl.dot(A_rb, X, y, input_precision=PREC)
        y = tl.dot(A_rk, v, y, input_precision=PREC)       # [C, BV]
        tt = c0 + t
        o = base + tt[:, None].to(tl.int64) * x_st
        tl.store(y_ptr + o + i[None, :], y.to(y_ptr.dtype.element_ty), mask=(tt < T)[:, None])
        tail = tl.exp(g_end[None, :] - g)                  # decay after t to the chunk end
        s = s * tl.exp(g_end)[None, :]
        s = tl.dot(tl.trans(X), ka * tail, s, input_precision=PREC)
        s = tl.dot(tl.trans(v), k * tail, s, input_precision=PREC)
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


def _launch(kernel, S: Tensor, xs: tuple[Tensor, ...], T: int, rows: int, **meta) -> Tensor:
    """Common launch: xs = (r, w, k, v, kappa, a) viewed as [B, T, H, N]; returns y like r."""
    B, _, H, N = xs[0].shape
    assert N == N_HEAD and S.shape == (B, H, N, N), (S.shape, xs[0].shape)
    xs = tuple(x.contiguous() for x in xs)
    y = torch.empty_like(xs[0])
    St = S if S.stride(-1) == 1 and S.stride(-2) == N else S.contiguous()
    grid = (B * H, N // rows)
    kernel[grid](St, *xs, y, T, H, St.stride(0), St.stride(1), T * H * N, H * N,
                 N=N, **meta)
    if St is not S:
        S.copy_(St)
    return y


def wkv_step_triton(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
                    kappa: Tensor, a: Tensor, rows: int | None = None,
                    warps: int | None = None) -> Tensor:
    """Decode step. S: [B, H, N, N] fp32|fp16 (in place); r..a: [B, H, N] -> y [B, H, N].
    rows / warps: value rows and warps per program (default: by batch size)."""
    xs = tuple(x.unsqueeze(1) for x in (r, w, k, v, kappa, a))
    return wkv_seq_triton(S, *xs, rows=rows, warps=warps, smallest=16).squeeze(1)


def wkv_seq_triton(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
                   kappa: Tensor, a: Tensor, rows: int | None = None,
                   warps: int | None = None, smallest: int = 8) -> Tensor:
    """T tokens one at a time, S in registers. S: [B, H, N, N]; r..a: [B, T, H, N]."""
    B, T, H, N = r.shape
    rows = rows or _rows_per_program(B * H, r.device, smallest)
    return _launch(_recurrent_kernel, S, (r, w, k, v, kappa, a), T, rows,
                   BI=rows, num_warps=warps or max(1, rows // 16))


def wkv_chunk_triton(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
                     kappa: Tensor, a: Tensor, rows: int | None = None,
                     warps: int = 4, precision: str = "ieee") -> Tensor:
    """T tokens, CHUNK at a time (WY form). S: [B, H, N, N]; r..a: [B, T, H, N].
    precision: tl.dot's input_precision for the fp32 products ("ieee" or "tf32x3")."""
    B, T, H, N = r.shape
    rows = rows or _rows_per_program(B * H, r.device, 16)
    return _launch(_chunk_kernel, S, (r, w, k, v, kappa, a), T, rows,
                   BV=rows, C=CHUNK, LOG2C=CHUNK.bit_length() - 1, PREC=precision,
                   num_warps=warps)
