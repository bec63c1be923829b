"""Skinny matrix products for decode at small batch: out[g] = epilogue(x[g] @ W[g]^T).

At a handful of rows a decode step is a weight read: cuBLAS's kernels for such shapes read the
weights at about half the bandwidth of the H200 (docs/performance.md). This kernel gives every
program ``BLOCK_N`` weight rows (contiguous along K) and all M <= 16 input rows, accumulates in
fp32 through one tensor-core product a tile, and needs no split of K (so no atomics: results are
the same run to run). A grid axis runs G products of one shape in one launch (r, k, v; the LoRA
stages). Epilogues fold the neighbouring element-wise work into the product:

* ``EPI_STORE``: out = acc, in out's dtype;
* ``EPI_RELU2``: out = relu(acc)^2 (the FFN key), in out's dtype;
* ``EPI_ADD``: out += acc with out the fp32 residual (the output and FFN value products);
* ``EPI_LORA``: group 1 tanh, group 3 sigmoid, others as stored (the LoRA first stages: v, w, a, g).

``limits`` (optional, [G] int32) bounds each group's valid N and K (zero-padded LoRA stacks:
programs past a group's N return at once and K stops at its limit).
"""

import torch
import triton
import triton.language as tl
from torch import Tensor

EPI_STORE, EPI_RELU2, EPI_ADD, EPI_LORA = 0, 1, 2, 3
MAX_ROWS = 16


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, out_ptr, lim_ptr, M, N, K,
                 sxg, sxm, swg, swn, sog, som,
                 EPI: tl.constexpr, LIMITS: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    g = tl.program_id(1).to(tl.int64)
    n_lim = N
    k_lim = K
    if LIMITS:
        n_lim = tl.minimum(tl.load(lim_ptr + 2 * g), N)
        k_lim = tl.minimum(tl.load(lim_ptr + 2 * g + 1), K)
    if pid * BLOCK_N < n_lim:
        rows = tl.arange(0, 16)
        n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        kk = tl.arange(0, BLOCK_K)
        x_base = x_ptr + g * sxg + rows[:, None] * sxm
        w_base = w_ptr + g * swg + n[:, None].to(tl.int64) * swn
        acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, k_lim, BLOCK_K):
            k = k0 + kk
            km = k < k_lim
            xt = tl.load(x_base + k[None, :], mask=(rows[:, None] < M) & km[None, :], other=0.0)
            wt = tl.load(w_base + k[None, :], mask=(n[:, None] < n_lim) & km[None, :],
                         other=0.0)
            acc = tl.dot(xt, tl.trans(wt), acc)
        if EPI == 1:
            acc = tl.maximum(acc, 0.0)
            acc = acc * acc
        if EPI == 3:
            if g == 1:
                acc = 2.0 / (1.0 + tl.exp(-2.0 * acc)) - 1.0  # tanh
            if g == 3:
                acc = 1.0 / (1.0 + tl.exp(-acc))
        o = out_ptr + g * sog + rows[:, None] * som + n[None, :]
        om = (rows[:, None] < M) & (n[None, :] < N)
        if EPI == 2:
            acc += tl.load(o, mask=om, other=0.0)
        tl.store(o, acc.to(out_ptr.dtype.element_ty), mask=om)


def _config(M: int, N: int, K: int, G: int) -> tuple[int, int, int, int]:
    """(BLOCK_N, BLOCK_K, num_warps, num_stages) for this shape: the fastest of a sweep on the
    H200 at 1, 4 and 16 rows (`python -m server.bench gemv --sweep 1,4,16`, docs/performance.md)
    for the products of a 2.9B layer; other sizes take the rule of the nearest shape."""
    if N >= 8 * K:  # the head: vocabulary x C
        return 64, 256, 4, 3
    if N > K:  # FFN key (4C x C); LoRA second stages (C x D)
        return 32, 128, 4, 4
    if N < K and G > 1:  # LoRA first stages (D x C): few row blocks, long rows
        return 16, 512, 4, 4
    if G > 1:  # r, k, v
        return 64, 256, 4, 4
    return 32, 512, 4, 4  # output (C x C), FFN value (C x 4C)


def gemv(x: Tensor, w: Tensor, out: Tensor | None = None, epi: int = EPI_STORE,
         limits: Tensor | None = None, config: tuple[int, int, int, int] | None = None) -> Tensor:
    """x [M, K] or [G, M, K]; w [N, K] or [G, N, K] (rows contiguous along K); M <= 16.
    Returns out ([M, N] / [G, M, N]; allocated in x's dtype unless given; EPI_ADD needs it)."""
    squeeze = x.dim() == 2
    x3, w3 = (x.unsqueeze(0), w.unsqueeze(0)) if squeeze else (x, w)
    G, M, K = x3.shape
    N = w3.shape[1]
    if M > MAX_ROWS or w3.shape[2] != K or w3.shape[0] != G:
        raise ValueError(f"gemv: x {tuple(x.shape)} and w {tuple(w.shape)} do not fit (M <= 16)")
    if x3.stride(-1) != 1 or w3.stride(-1) != 1:
        raise ValueError("gemv needs x and w contiguous along K")
    if out is None:
        if epi == EPI_ADD:
            raise ValueError("EPI_ADD adds into a given out")
        out = torch.empty((G, M, N) if not squeeze else (M, N), dtype=x.dtype, device=x.device)
    o3 = out.unsqueeze(0) if squeeze else out
    if tuple(o3.shape) != (G, M, N) or o3.stride(-1) != 1:
        raise ValueError(f"gemv: out {tuple(out.shape)} must be [G, M, N] contiguous along N")
    block_n, block_k, warps, stages = config or _config(M, N, K, G)
    grid = (triton.cdiv(N, block_n), G)
    _gemv_kernel[grid](x3, w3, o3, limits if limits is not None else x3, M, N, K,
                       x3.stride(0), x3.stride(1), w3.stride(0), w3.stride(1),
                       o3.stride(0), o3.stride(1), EPI=epi, LIMITS=limits is not None,
                       BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps, num_stages=stages)
    return out
