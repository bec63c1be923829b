"""The WKV-7 recurrence in plain PyTorch: one decode step and an exact chunked form for prefill.

Per head (N = 64 channels), with S[i, j] (row i = value index, column j = key index):

    S <- S·diag(w) - (S·kappa)(kappa ⊙ a)^T + v·k^T ;   y = S·r

w: decay in (0, 1); kappa: the per-head L2-normalised key; a: in-context learning rate; k: the
modified key. Same contract as `server/model/kernels` (so a kernel can replace either function):
S is [B, H, N, N] fp32 or fp16, updated in place (math in fp32 — fp64 for an fp64 S —, cast back once per call);
vectors are [B, H, N] (step) or [B, T, H, N] (chunk) of any float dtype; y comes back in r's dtype.
A step with w = 1 and k = v = kappa = 0 leaves S unchanged bit for bit (used for padding/masking).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

SUB = 32  # tokens per sub-chunk: exp(±0.61·SUB/2) stays far inside fp32 range


def wkv_step(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor, kappa: Tensor,
             a: Tensor) -> Tensor:
    """One token. S: [B, H, N, N] (in place); r, w, k, v, kappa, a: [B, H, N] -> y [B, H, N].
    An fp32 (fp64) contiguous S is updated in place with three passes over it."""
    B, H, N = r.shape
    out_dtype, md = r.dtype, torch.promote_types(S.dtype, torch.float32)
    s = S if S.dtype == md and S.is_contiguous() else S.to(md).contiguous()
    r, w, k, v, kappa, a = (x.to(md).reshape(B * H, N) for x in (r, w, k, v, kappa, a))
    s3 = s.view(B * H, N, N)
    s_kappa = torch.bmm(s3, kappa.unsqueeze(-1))  # S·kappa: [BH, N, 1]
    s3.mul_(w.unsqueeze(1))  # S·diag(w)
    s3.baddbmm_(s_kappa, (-kappa * a).unsqueeze(1))  # - (S·kappa)(kappa ⊙ a)^T
    s3.baddbmm_(v.unsqueeze(-1), k.unsqueeze(1))  # + v·k^T
    if s is not S:
        S.copy_(s)
    return torch.bmm(s3, r.unsqueeze(-1)).view(B, H, N).to(out_dtype)


def _chunk_terms(r, lw, k, v, na, b):
    """Everything about a chunk of T tokens that does not depend on its incoming state S_0.
    Inputs [..., T, N] fp32 (leading dims e.g. [B, H, chunks]) with lw = log w, na = -kappa,
    b = kappa ⊙ a. Returns R, Y0, M, D such that
        y = R·S_0^T + Y0        (R [..., T, N(key)], Y0 [..., T, N(value)])
        S_T = S_0·M + D         (M [..., N(key), N(key)], D [..., N(value), N(key)]).

    With G_t = w_1 ⊙ ... ⊙ w_t and u_t = S_{t-1}·na_t (what the low-rank term removes),
        S_t = S_0·diag(G_t) + sum_{s<=t} (u_s b_s^T + v_s k_s^T)·diag(G_t / G_s),
    so the rows u_t solve a unit lower-triangular system: U = P·S_0^T + Q."""
    T = r.shape[-2]
    g = lw.cumsum(-2)  # log G_t
    g_prev = g - lw  # log G_{t-1}
    mid = g[..., T // 2: T // 2 + 1, :]  # scale reference: exp() of both signs stays moderate
    b_s, k_s = b * torch.exp(mid - g), k * torch.exp(mid - g)  # ⊙ G_mid / G_s
    na_t, r_t = na * torch.exp(g_prev - mid), r * torch.exp(g - mid)  # ⊙ G_{t-1|t} / G_mid
    ones = torch.ones(T, T, dtype=torch.bool, device=r.device)
    lower, strict = ones.tril(), ones.tril(-1)
    m_nb = (na_t @ b_s.mT) * strict  # [..., T, T]: (na_t ⊙ G_{t-1}/G_s)·b_s, s < t
    m_nk = (na_t @ k_s.mT) * strict
    a_rb = (r_t @ b_s.mT) * lower  # (r_t ⊙ G_t/G_s)·b_s, s <= t
    a_rk = (r_t @ k_s.mT) * lower
    eye = torch.eye(T, dtype=r.dtype, device=r.device)
    inv = torch.linalg.solve_triangular(eye - m_nb, eye.expand_as(m_nb), upper=False,
                                        unitriangular=True)  # (I - m_nb)^-1
    P = inv @ (na * torch.exp(g_prev))  # [..., T, N(key)]
    Q = inv @ (m_nk @ v)  # [..., T, N(value)]
    R = r * torch.exp(g) + a_rb @ P
    Y0 = a_rb @ Q + a_rk @ v
    tail = torch.exp(g[..., -1:, :] - g)  # G_T / G_s <= 1
    bt, kt = b * tail, k * tail
    M = torch.diag_embed(torch.exp(g[..., -1, :])) + P.mT @ bt
    D = Q.mT @ bt + v.mT @ kt
    return R, Y0, M, D


def wkv_chunk(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor, kappa: Tensor,
              a: Tensor, mid: Tensor | None = None, S_mid: Tensor | None = None,
              round_chunks: bool = False) -> Tensor:
    """T tokens in order, exactly. S: [B, H, N, N] (in place); r, w, k, v, kappa, a:
    [B, T, H, N] -> y [B, T, H, N] in r's dtype. The sequence is cut into SUB-token chunks whose
    terms are computed all at once; only S is carried from chunk to chunk (S <- S·M + D).
    ``mid`` ([K] integer tensor, one sequence) and ``S_mid`` ([K, H, N, N]): row k of S_mid gets
    the state after the first ``mid[k]`` tokens when that is a positive multiple of SUB, as a
    call ending there would leave S (untouched otherwise: ``mid_export``). ``round_chunks``
    (a split-invariant model): S is rounded to its dtype after every chunk, as where a call
    ends, so an fp16 state has the same bits however the sequence is cut into calls at chunk
    ends (the Triton scan's ROUND)."""
    B, T, H, N = r.shape
    pad = (-T) % SUB  # padded with identity steps: w = 1, everything else 0
    n = (T + pad) // SUB
    s = S.to(torch.promote_types(S.dtype, torch.float32))  # the math dtype (fp32, or fp64)
    rounding = round_chunks and s.dtype != S.dtype

    def prep(x: Tensor) -> Tensor:  # [B, T, H, N] -> [B, H, n, SUB, N]
        x = F.pad(x.to(s.dtype).transpose(1, 2), (0, 0, 0, pad))
        return x.reshape(B, H, n, SUB, N)

    r32, lw, k32, v32, kap = (prep(x) for x in (r, torch.log(w.to(s.dtype)), k, v, kappa))
    R, Y0, M, D = _chunk_terms(r32, lw, k32, v32, -kap, kap * prep(a))
    starts, export = [], mid_export(mid, S_mid, SUB)
    for c in range(n):
        starts.append(s)
        s = s @ M[:, :, c] + D[:, :, c]
        if rounding:
            s = s.to(S.dtype).to(s.dtype)
        export(c + 1, s)
    y = R @ torch.stack(starts, 2).mT + Y0  # [B, H, n, SUB, N(value)]
    S.copy_(s)
    return y.reshape(B, H, n * SUB, N)[:, :, :T].transpose(1, 2).to(r.dtype)


def mid_export(mid: Tensor | None, S_mid: Tensor | None, chunk: int):
    """``export(c, s)``, called with the math state ``s`` ([1, H, N, N]: one sequence) after
    each ``c`` chunks of ``chunk`` tokens: copies it into row k of ``S_mid`` (cast as a call's
    end casts S) where ``c · chunk`` is ``mid[k]`` (``mid``: [K] positions, one row each).
    Outside a CUDA graph's capture ``mid`` is read once (a CPU tensor costs nothing); while
    capturing, a device-side select per chunk (the positions are an input of the graph). A
    no-op without ``mid``."""
    if mid is None or S_mid is None:
        return lambda c, s: None
    if mid.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        def export(c: int, s: Tensor) -> None:
            hit = (mid == c * chunk).view(-1, 1, 1, 1)
            S_mid.copy_(torch.where(hit, s.to(S_mid.dtype), S_mid))
        return export
    points = mid.tolist()

    def export_at(c: int, s: Tensor) -> None:
        for k, m in enumerate(points):
            if c * chunk == m:
                S_mid[k:k + 1].copy_(s)
    return export_at
