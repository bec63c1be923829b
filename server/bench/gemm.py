"""A prefill pass's matrix products: cuBLAS as served against Triton GEMMs, by row count.

    python -m server.bench gemm                         # 2.9B's shapes, rows 160,1888,4096
    python -m server.bench gemm --c 4096 --rows 160     # 7.2B's

Why: a cached chat turn's pass (~160 rows at 2.9B) spends ~2.6 ms in its products, ~2x the
time its weights take to read (docs/performance.md, session 18). A split-invariant prefill needs
the same kernel at every row count (``row_invariance``), so a replacement must also be timed at
a long prompt's row counts, and its rows must keep their bits whatever the row count.

One layer's products of the fused prefill (fused.py) for ``--layers`` layers' distinct random
weights (more than the L2 holds, as in a pass), replayed as one CUDA graph:
r/k/v (one batched product), the output (fp32, added into the residual), the FFN key (fp16) and
the FFN value (fp32, added; over the slices of K ``row_invariance`` chose for 2.9B, two, as
one batched product: fused.py batches them up to ``SLICED_BMM_MAX_ROWS`` rows and adds slice
by slice above). µs a layer, and the weights' bytes over that time. Each Triton configuration
(row block, column block, K block, stages, warps; plain pointer loads, or TMA descriptors with
or without warp specialisation) is timed on the same calls; "bits across rows" says whether its
first rows at every row count equal the same rows computed at the largest (the split
invariance a prefill needs), "bits = first config" whether its results equal the first
configuration's."""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl

from server.bench import common
from server.model.kernels import fused_triton

CONFIGS = (  # (BM, BN, BK, stages, warps)
    (64, 64, 64, 4, 4), (64, 128, 64, 4, 4), (64, 256, 64, 3, 4), (128, 64, 64, 4, 4),
    (128, 128, 64, 4, 8), (128, 256, 64, 3, 8), (256, 64, 64, 3, 8), (256, 128, 64, 3, 8),
    (64, 32, 128, 4, 4), (64, 64, 128, 3, 4), (128, 64, 128, 3, 8),
    (64, 64, 64, 4, 4, "tma", False), (64, 128, 64, 4, 4, "tma", False),
    (128, 64, 64, 4, 4, "tma", False), (128, 128, 64, 4, 8, "tma", False),
    (64, 64, 128, 4, 4, "tma", False), (64, 128, 64, 6, 4, "tma", False),
    (64, 64, 64, 4, 4, "tma", True), (128, 128, 64, 4, 8, "tma", True),
)


@triton.jit(do_not_specialize=["M"])
def _mm_kernel(a_ptr, w_ptr, c_ptr, M, N, K, sab, sam, swb, swn, scb, scm,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
               ADD: tl.constexpr):
    """c[b] (+)= a[b] @ w[b]^T, fp32 accumulation in K order (K a multiple of BK)."""
    pid, bat = tl.program_id(0), tl.program_id(1).to(tl.int64)
    num_m, num_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    per_group = GROUP * num_m
    gid = pid // per_group  # GROUP column blocks, all their row blocks, run together
    first_n = gid * GROUP
    size_n = tl.minimum(num_n - first_n, GROUP)
    pid_n = first_n + (pid % per_group) % size_n
    pid_m = (pid % per_group) // size_n
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + bat * sab + rm[:, None].to(tl.int64) * sam + rk[None, :]
    w_ptrs = w_ptr + bat * swb + rn[None, :].to(tl.int64) * swn + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    ok = rm[:, None] < M
    for _ in range(0, K, BK):
        a = tl.load(a_ptrs, mask=ok, other=0.0)
        w = tl.load(w_ptrs)
        acc = tl.dot(a, w, acc)
        a_ptrs += BK
        w_ptrs += BK
    c_ptrs = c_ptr + bat * scb + rm[:, None].to(tl.int64) * scm + rn[None, :]
    if ADD:
        acc += tl.load(c_ptrs, mask=ok, other=0.0)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=ok)


@triton.jit(do_not_specialize=["M"])
def _mm_tma_kernel(a_desc, w_desc, c_ptr, M, N, K, scb, scm,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
                   ADD: tl.constexpr, WS: tl.constexpr):
    """_mm_kernel with TMA tensor descriptors over [B*M, K] and [B*N, K] (rows past M of a
    batch read the next batch's: computed, never stored)."""
    pid, bat = tl.program_id(0), tl.program_id(1)
    num_m, num_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    per_group = GROUP * num_m
    gid = pid // per_group
    first_n = gid * GROUP
    size_n = tl.minimum(num_n - first_n, GROUP)
    pid_n = first_n + (pid % per_group) % size_n
    pid_m = (pid % per_group) // size_n
    off_a = bat * M + pid_m * BM
    off_w = bat * N + pid_n * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        a = a_desc.load([off_a, k])
        w = w_desc.load([off_w, k])
        acc = tl.dot(a, w.T, acc)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    ok = rm[:, None] < M
    c_ptrs = c_ptr + bat.to(tl.int64) * scb + rm[:, None].to(tl.int64) * scm + rn[None, :]
    if ADD:
        acc += tl.load(c_ptrs, mask=ok, other=0.0)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=ok)


def triton_mm(a, w, out, cfg, add=False):
    """out[b] (+)= a[b] @ w[b]^T for 3-d a [B, M, K], w [B, N, K], out [B, M, N] (or 2-d)."""
    a3, w3, o3 = (t if t.dim() == 3 else t.unsqueeze(0) for t in (a, w, out))
    B, M, K = a3.shape
    N = w3.shape[1]
    BM, BN, BK, stages, warps = cfg[:5]
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN), B)
    if len(cfg) > 5:  # (..., "tma", warp_specialize)
        from triton.tools.tensor_descriptor import TensorDescriptor

        ad = TensorDescriptor.from_tensor(a3.reshape(B * M, K), [BM, BK])
        wd = TensorDescriptor.from_tensor(w3.reshape(B * N, K), [BN, BK])
        _mm_tma_kernel[grid](ad, wd, o3, M, N, K, o3.stride(0), o3.stride(1), BM=BM, BN=BN,
                             BK=BK, GROUP=8, ADD=add, WS=cfg[6], num_stages=stages,
                             num_warps=warps)
        return out
    _mm_kernel[grid](a3, w3, o3, M, N, K, a3.stride(0), a3.stride(1), w3.stride(0),
                     w3.stride(1), o3.stride(0), o3.stride(1), BM=BM, BN=BN, BK=BK, GROUP=8,
                     ADD=add, num_stages=stages, num_warps=warps)
    return out


class Layer:
    def __init__(self, C, dev, gen):
        def rand(*s):
            return (torch.randn(*s, device=dev, generator=gen) * C ** -0.5).half()
        self.rkv, self.wo = rand(3, C, C), rand(C, C)
        self.key, self.value = rand(4 * C, C), rand(C, 4 * C)

    def nbytes(self):
        return sum(t.numel() * 2 for t in (self.rkv, self.wo, self.key, self.value))


def served(lay, xs, x, xk, h, slices):
    """fused.py's cuBLAS calls (split-invariant prefill): r/k/v, output, FFN key, FFN value."""
    torch.bmm(xs, lay.rkv.transpose(1, 2))
    torch.addmm(x, xk, lay.wo.t(), out_dtype=torch.float32, out=x)
    torch.nn.functional.linear(xk, lay.key, out=h)
    N, K = lay.value.shape
    n = K // slices
    if slices == 1:
        torch.addmm(x, h, lay.value.t(), out_dtype=torch.float32, out=x)
        return
    parts = torch.bmm(h.view(-1, slices, n).transpose(0, 1),
                      lay.value.view(N, slices, n).permute(1, 2, 0), out_dtype=torch.float32)
    fused_triton.add_parts_(x, parts)


def tri(lay, xs, x, xk, h, cfg, rkv_out):
    triton_mm(xs, lay.rkv, rkv_out, cfg)
    triton_mm(xk, lay.wo, x, cfg, add=True)
    triton_mm(xk, lay.key, h, cfg)
    triton_mm(h, lay.value, x, cfg, add=True)


def graph_time(fn, reps=20) -> float:
    """ms of one call of ``fn`` captured in a CUDA graph (after an eager run)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        start.record()
        for _ in range(reps):
            g.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / reps)
    return best


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="server.bench gemm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--c", type=int, default=2560, help="model width (2.9B: 2560, 7.2B: 4096)")
    p.add_argument("--rows", default="160,1888,4096")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--slices", type=int, default=2, help="the FFN value's slices as served")
    p.add_argument("--configs", default="", help="indices into CONFIGS (default: all)")
    args = p.parse_args(argv)
    dev, C = torch.device("cuda"), args.c
    gen = torch.Generator(device=dev).manual_seed(0)
    layers = [Layer(C, dev, gen) for _ in range(args.layers)]
    rows = [int(r) for r in args.rows.split(",")]
    configs = [CONFIGS[int(i)] for i in args.configs.split(",")] if args.configs else CONFIGS
    top = max(rows)
    X = (torch.randn(top, C, device=dev, generator=gen)).half()
    H = (torch.randn(top, 4 * C, device=dev, generator=gen)).half()
    nbytes = layers[0].nbytes()
    print(f"# gemm · C {C} · {args.layers} layers' weights ({nbytes / 1e6:.0f} MB a layer) · "
          f"{common.gpu_name()} · torch {torch.__version__} · triton {triton.__version__}")
    results, outs = {}, {}
    for M in rows:
        xk, h = X[:M].contiguous(), H[:M].contiguous()
        xs = xk.expand(3, M, C).contiguous()
        x = torch.zeros(M, C, device=dev)
        hk = torch.empty(M, 4 * C, device=dev, dtype=torch.float16)
        ms = graph_time(lambda: [served(lay, xs, x, xk, h, args.slices) for lay in layers])
        results[("cuBLAS", M)] = ms / args.layers
        for cfg in configs:
            rkv_out = torch.empty(3, M, C, device=dev, dtype=torch.float16)
            try:
                ms = graph_time(lambda: [tri(lay, xs, x, xk, hk, cfg, rkv_out) for lay in layers])
            except Exception as e:  # noqa: BLE001 (a configuration that does not fit)
                print(f"{cfg}: {type(e).__name__}: {str(e)[:120]}")
                continue
            results[(cfg, M)] = ms / args.layers
            # the bits: one layer's four products from a zero residual
            lay = layers[0]
            x0 = torch.zeros(M, C, device=dev)
            tri(lay, xs, x0, xk, hk, cfg, rkv_out)
            outs[(cfg, M)] = (rkv_out.clone(), hk.clone(), x0.clone())
    header = ["form", *[f"{M} rows µs" for M in rows], *[f"{M} rows TB/s" for M in rows],
              "bits across rows", "bits = first config"]
    table = []
    ref_cfg = next((c for c in configs if (c, top) in outs), None)
    for form in ["cuBLAS", *configs]:
        if not all((form, M) in results for M in rows):
            continue
        us = [results[(form, M)] * 1e3 for M in rows]
        tbs = [nbytes / (u * 1e-6) / 1e12 for u in us]
        bits = same = "-"
        if form != "cuBLAS":
            big = outs[(form, top)]
            bits = all(torch.equal(o[..., :M, :], b[..., :M, :])
                       for M in rows for o, b in zip(outs[(form, M)], big))
            same = all(torch.equal(o, b) for o, b in zip(outs[(form, top)], outs[(ref_cfg, top)]))
        table.append([str(form), *[f"{u:.1f}" for u in us], *[f"{t:.2f}" for t in tbs],
                      str(bits), str(same)])
    print(common.table(header, table))


if __name__ == "__main__":
    main()
