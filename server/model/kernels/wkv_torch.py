"""Plain-torch WKV-7 recurrence: the reference for the Triton kernels (fp32 math).

Per head (N = 64), with S[i, j] (row i = value index, column j = key index):

    S <- S·diag(w) - (S·kappa)(kappa ⊙ a)^T + v·k^T ;   y = S·r

w is the decay in (0, 1) (not its log), kappa the normalised key, a the in-context learning
rate, k the modified key. Every function takes S as [B, H, N, N] in fp32 or fp16 (updated in
place; the math runs in fp32 and the result is cast back once per call) and returns y in r's
dtype.

`wkv_step_ref` / `wkv_chunk_ref` are the sequential ground truth. `wkv_chunk_wy` is the same
function computed 16 tokens at a time in the exact chunked (WY) form that the Triton prefill
kernels use (`_chunk_prep` for all chunks in parallel, then `_chunk_apply` chunk after chunk);
it exists so that the algebra of those kernels is checked on the CPU.
"""

import torch
from torch import Tensor

from server.model.wkv import mid_export

CHUNK = 16  # tokens per chunk of the WY form (the Triton kernel's too)


def _math_dtype(S: Tensor) -> torch.dtype:
    """fp32, or fp64 when S is fp64 (a higher-precision reference for tests)."""
    return torch.promote_types(S.dtype, torch.float32)


def _step(s: Tensor, r, w, k, v, kappa, a) -> Tensor:
    """One token, all in the math dtype. s: [B, H, N, N] (updated in place); vectors [B, H, N]."""
    sk = torch.einsum("bhij,bhj->bhi", s, kappa)  # S·kappa: [B, H, N]
    s.mul_(w.unsqueeze(-2))
    s.sub_(sk.unsqueeze(-1) * (kappa * a).unsqueeze(-2))
    s.add_(v.unsqueeze(-1) * k.unsqueeze(-2))
    return torch.einsum("bhij,bhj->bhi", s, r)  # [B, H, N]


def wkv_step_ref(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
                 kappa: Tensor, a: Tensor) -> Tensor:
    """One decode step. S: [B, H, N, N] fp32|fp16 (in place); r..a: [B, H, N] -> y [B, H, N]."""
    s = S.to(_math_dtype(S))
    y = _step(s, *(x.to(s.dtype) for x in (r, w, k, v, kappa, a)))
    S.copy_(s)
    return y.to(r.dtype)


def wkv_chunk_ref(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
                  kappa: Tensor, a: Tensor, mid: Tensor | None = None,
                  S_mid: Tensor | None = None) -> Tensor:
    """T steps in order. S: [B, H, N, N] (in place); r..a: [B, T, H, N] -> y [B, T, H, N].
    ``mid``, ``S_mid``: the state after ``mid[k]`` tokens copied into row k
    (``wkv.mid_export``)."""
    s = S.to(_math_dtype(S))
    xs = [x.to(s.dtype) for x in (r, w, k, v, kappa, a)]
    export, ys = mid_export(mid, S_mid, 1), []
    for t in range(r.shape[1]):
        ys.append(_step(s, *(x[:, t] for x in xs)))
        export(t + 1, s)
    S.copy_(s)
    return torch.stack(ys, 1).to(r.dtype)


def _inv_unit_lower(L: Tensor) -> Tensor:
    """(I - L)^-1 for strictly lower-triangular L [..., C, C] (C a power of two):
    the product (I + L)(I + L^2)(I + L^4)... , exact because L^C = 0."""
    P = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device) + L
    Lp = L
    for _ in range(L.shape[-1].bit_length() - 2):
        Lp = Lp @ Lp
        P = P + P @ Lp
    return P


def _chunk_prep(r, lw, k, v, kappa, ka) -> tuple[Tensor, ...]:
    """The state-independent part of one chunk (no S needed, so all chunks at once).
    r..ka: [..., C, N] with lw = log w and ka = kappa ⊙ a. Returns (W, Q, Bt, Yc, D, e) with
    W, Q, Bt, Yc: [..., C, N], D: [..., N, N], e: [..., 1, N], such that for a chunk entered
    with state s:  y = Q s^T + Yc  and  s' = s·diag(e) + (W s^T)^T Bt + D."""
    C = r.shape[-2]
    g = lw.cumsum(-2)                    # log of the decay product up to and including t
    g_prev = g - lw                      # ... up to t - 1
    g_end = g[..., -1:, :]               # [..., 1, N]
    ref = 0.5 * g_end                    # mid-chunk reference keeps exp() of both signs in range
    a_t = -kappa * torch.exp(g_prev - ref)
    r_t = r * torch.exp(g - ref)
    b_t = ka * torch.exp(ref - g)
    k_t = k * torch.exp(ref - g)
    strict = torch.tril(torch.ones(C, C, dtype=torch.bool, device=r.device), -1)
    incl = torch.tril(torch.ones(C, C, dtype=torch.bool, device=r.device))
    A_ab = (a_t @ b_t.mT).masked_fill(~strict, 0)   # [..., C, C]
    A_ak = (a_t @ k_t.mT).masked_fill(~strict, 0)
    A_rb = (r_t @ b_t.mT).masked_fill(~incl, 0)
    A_rk = (r_t @ k_t.mT).masked_fill(~incl, 0)
    P = _inv_unit_lower(A_ab)
    # x_t = S_{t-1}·a_t (as rows over t) = W s^T + U
    W = P @ (-kappa * torch.exp(g_prev))
    U = P @ (A_ak @ v)
    tail = torch.exp(g_end - g)                       # decay from t+1 to the chunk end
    Bt = ka * tail
    D = U.mT @ Bt + v.mT @ (k * tail)
    return W, r * torch.exp(g) + A_rb @ W, Bt, A_rb @ U + A_rk @ v, D, torch.exp(g_end)


def _chunk_apply(s: Tensor, W, Q, Bt, Yc, D, e) -> Tensor:
    """Enter one chunk with s [..., N, N] (updated in place); returns y [..., C, N]."""
    st = s.mT                                         # [..., N(j), N(i)]
    y = Q @ st + Yc
    s.copy_(s * e + (W @ st).mT @ Bt + D)
    return y


def wkv_chunk_wy(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
                 kappa: Tensor, a: Tensor) -> Tensor:
    """Same contract as `wkv_chunk_ref`, computed CHUNK tokens at a time (WY form).
    A ragged last chunk is padded with identity steps (w = 1, everything else 0)."""
    B, T, H, N = r.shape
    out_dtype, pad = r.dtype, (-T) % CHUNK
    s = S.to(_math_dtype(S))
    # [B, T, H, N] -> [B, H, T + pad, N], math dtype
    lw, r, k, v, kappa, a = (torch.nn.functional.pad(x.to(s.dtype).transpose(1, 2), (0, 0, 0, pad))
                             for x in (torch.log(w.to(s.dtype)), r, k, v, kappa, a))
    # all chunks' state-independent parts at once: [B, H, n_chunks, C, N]
    prep = _chunk_prep(*(x.unflatten(2, (-1, CHUNK)) for x in (r, lw, k, v, kappa, kappa * a)))
    ys = [_chunk_apply(s, *(p[:, :, c] for p in prep)) for c in range((T + pad) // CHUNK)]
    S.copy_(s)
    return torch.cat(ys, 2)[:, :, :T].transpose(1, 2).to(out_dtype)
