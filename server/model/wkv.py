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
from torch import Tensor

SUB = 32  # tokens per sub-chunk: exp(±0.61·SUB/2) stays far inside fp32 range


def wkv_step(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor, kappa: Tensor,
             a: Tensor) -> Tensor:
    """One token. S: [B, H, N, N] (in place); r, w, k, v, kappa, a: [B, H, N] -> y [B, H, N]."""
    out_dtype, s = r.dtype, S.to(torch.promote_types(S.dtype, torch.float32))
    r, w, k, v, kappa, a = (x.to(s.dtype) for x in (r, w, k, v, kappa, a))
    s_kappa = (s @ kappa.unsqueeze(-1))  # [B, H, N, 1]
    s = s * w.unsqueeze(-2) - s_kappa @ (kappa * a).unsqueeze(-2) + v.unsqueeze(-1) @ k.unsqueeze(-2)
    S.copy_(s)
    return (s @ r.unsqueeze(-1)).squeeze(-1).to(out_dtype)


def _sub_chunk(s: Tensor, r, lw, k, v, na, b) -> Tensor:
    """T <= SUB tokens exactly, fp32. s: [B, H, N, N] (replaced in place); r, lw, k, v, na, b:
    [B, H, T, N] with lw = log w, na = -kappa, b = kappa ⊙ a. Returns y [B, H, T, N].

    With G_t = w_1 ⊙ ... ⊙ w_t and u_t = S_{t-1}·na_t (what the low-rank term removes),
        S_t = S_0·diag(G_t) + sum_{s<=t} (u_s b_s^T + v_s k_s^T)·diag(G_t / G_s),
    so the rows u_t solve a unit lower-triangular system and y_t = S_t·r_t is a few matmuls."""
    T = r.shape[-2]
    g = lw.cumsum(-2)  # log G_t: [B, H, T, N]
    mid = g[..., T // 2: T // 2 + 1, :]  # scale reference: both exp() signs stay moderate
    q_in, q_ex = torch.exp(g - mid), torch.exp(g - lw - mid)  # G_t, G_{t-1} (over G_mid)
    inv = torch.exp(mid - g)  # G_mid / G_s
    b_s, k_s = b * inv, k * inv
    na_t, r_t = na * q_ex, r * q_in
    lower = torch.ones(T, T, dtype=torch.bool, device=r.device).tril()
    strict = lower.tril(-1)
    # u_t = S_0 (na_t ⊙ G_{t-1}) + sum_{s<t} [(na_t ⊙ G_{t-1}/G_s)·b_s] u_s + [(...)·k_s] v_s
    s0_t = s.mT  # [B, H, N(key), N(value)]
    m_nb = (na_t @ b_s.mT) * strict  # [B, H, T, T]
    m_nk = (na_t @ k_s.mT) * strict
    g_abs = torch.exp(g - lw)  # G_{t-1}
    rhs = (na * g_abs) @ s0_t + m_nk @ v  # [B, H, T, N(value)]
    eye = torch.eye(T, dtype=r.dtype, device=r.device)
    u = torch.linalg.solve_triangular(eye - m_nb, rhs, upper=False, unitriangular=True)
    y = (r * torch.exp(g)) @ s0_t + ((r_t @ b_s.mT) * lower) @ u + ((r_t @ k_s.mT) * lower) @ v
    tail = torch.exp(g[..., -1:, :] - g)  # G_T / G_s <= 1: [B, H, T, N]
    s.copy_(s * torch.exp(g[..., -1:, :]) + u.mT @ (b * tail) + v.mT @ (k * tail))
    return y


def wkv_chunk(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor, kappa: Tensor,
              a: Tensor) -> Tensor:
    """T tokens in order, exactly (SUB at a time). S: [B, H, N, N] (in place);
    r, w, k, v, kappa, a: [B, T, H, N] -> y [B, T, H, N] in r's dtype."""
    T = r.shape[1]
    s = S.float()
    # [B, T, H, N] -> [B, H, T, N] fp32
    r32, lw, k32, v32, kap = (x.float().transpose(1, 2) for x in (r, torch.log(w.float()), k, v,
                                                                  kappa))
    b = kap * a.float().transpose(1, 2)
    ys = []
    for t0 in range(0, T, SUB):
        sl = slice(t0, min(T, t0 + SUB))
        ys.append(_sub_chunk(s, r32[:, :, sl], lw[:, :, sl], k32[:, :, sl], v32[:, :, sl],
                             -kap[:, :, sl], b[:, :, sl]))
    S.copy_(s)
    return torch.cat(ys, 2).transpose(1, 2).to(r.dtype)
