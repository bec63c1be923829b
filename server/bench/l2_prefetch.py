"""Does warming L2 with the next products' weights while a prefill pass's WKV runs help?

A cached chat turn's pass (~160 tokens at 2.9B) spends ~1.4 ms of its ~5.4 in the chunked WKV,
which is latency-bound and reads little memory, while the products after it (the output
product, the FFN key) run at about half the speed of reading their weights (docs/levers.md).
This benchmark times, per layer of the 2.9B shape and over ``--layers`` distinct weight sets
(so L2 holds nothing of a layer before its turn, as in a pass), CUDA graphs of:

- ``wkv``: the chunked WKV of one layer (``wkv_chunk``, split-invariant as served);
- ``wo`` / ``ffn_key``: the output product (added into an fp32 residual) / the FFN key product;
- ``seq``: wkv, then wo, then ffn_key, as in a layer;
- ``touch(MB)`` then wo and ffn_key on one stream: the products with that much of their weights
  just read into L2 (the touch's own time subtracted);
- ``seq+pf(MB, programs)``: the same with a side stream that, as the WKV starts, reads the first
  MB of [wo's weights, then the FFN key's] with L2's evict-last policy (``_touch``, ``programs``
  programs), joined at the layer's end: no product waits for it.

    python -m server.bench.l2_prefetch [--rows 160] [--layers 32] [--reps 30]
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl

from server.bench import common

C, F, H, N = 2560, 10240, 40, 64  # the 2.9B shape


@triton.jit
def _touch(ptr, n, out_ptr, BLOCK: tl.constexpr):
    """Read ``n`` fp16 values in BLOCK-sized pieces, program after program striding the range
    (evict-last in L2); each program stores one sum so the loads are kept."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(ptr + offs, mask=offs < n, other=0.0,
                       eviction_policy="evict_last").to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


def touch(flat: torch.Tensor, programs: int, sink: torch.Tensor) -> None:
    _touch[(programs,)](flat, flat.numel(), sink, BLOCK=4096, num_warps=4)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.bench.l2_prefetch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=160, help="tokens of the pass (its rows)")
    p.add_argument("--layers", type=int, default=32, help="distinct weight sets cycled")
    p.add_argument("--reps", type=int, default=30, help="graph replays timed")
    args = p.parse_args(argv)
    from server.model.kernels import wkv_chunk

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    L, T = args.layers, args.rows
    h16 = dict(device=dev, dtype=torch.float16)
    # a layer's wo and FFN key weights, one after the other in one buffer (what a prefetch
    # reads: the first bytes of it)
    both = [torch.randn(C * C + F * C, generator=g, **h16) * 0.02 for _ in range(L)]
    wo = [b[:C * C].view(C, C) for b in both]
    wk = [b[C * C:].view(F, C) for b in both]
    x = torch.randn(T, C, generator=g, **h16)
    resid = torch.zeros(T, C, device=dev, dtype=torch.float32)
    hid = torch.empty(T, F, **h16)
    f32 = dict(device=dev, dtype=torch.float32)
    r, k, v = (torch.randn(1, T, H, N, generator=g, **f32) * 0.1 for _ in range(3))
    w = torch.rand(1, T, H, N, generator=g, **f32) * 0.5 + 0.45
    kap = torch.nn.functional.normalize(torch.randn(1, T, H, N, generator=g, **f32), dim=-1)
    a = torch.rand(1, T, H, N, generator=g, **f32)
    S = torch.zeros(1, H, N, N, **f32)
    sink = torch.zeros(1024, **f32)
    side = torch.cuda.Stream(dev)

    def wkv_():
        wkv_chunk(S, r, w, k, v, kap, a, split_invariant=True)

    def wo_(i):
        torch.addmm(resid, x, wo[i].t(), out_dtype=torch.float32, out=resid)

    def key_(i):
        torch.mm(x, wk[i].t(), out=hid)

    def layer(i, pf_bytes=0, programs=0):
        main_s = torch.cuda.current_stream(dev)
        if pf_bytes:
            side.wait_stream(main_s)
            with torch.cuda.stream(side):
                touch(both[i][:pf_bytes // 2], programs, sink)
        wkv_()
        wo_(i)
        key_(i)
        if pf_bytes:
            main_s.wait_stream(side)

    def timed(fn) -> float:
        graph = common.cuda_graph(lambda: [fn(i) for i in range(L)])
        us = common.replay_us(graph, args.reps)
        return us[len(us) // 2] / L

    rows = [["wkv", f"{timed(lambda i: wkv_()):.1f}"],
            ["wo", f"{timed(wo_):.1f}"],
            ["ffn_key", f"{timed(key_):.1f}"],
            ["wo + ffn_key", f"{timed(lambda i: (wo_(i), key_(i))):.1f}"],
            ["seq", f"{timed(layer):.1f}"]]
    wo_mb = C * C * 2 / 2 ** 20
    for mb in (wo_mb, 24, 40):  # products right after their weights were read into L2
        n = int(mb * 2 ** 20) // 2
        t_touch = timed(lambda i, n=n: touch(both[i][:n], 264, sink))
        t_then = timed(lambda i, n=n: (touch(both[i][:n], 264, sink), wo_(i), key_(i)))
        rows.append([f"touch({mb:.1f} MB, 264) alone / then wo + ffn_key",
                     f"{t_touch:.1f} / {t_then:.1f} (products {t_then - t_touch:.1f})"])
    for mb in (wo_mb, 24, 40, 64):
        for programs in (64, 132, 264):
            us = timed(lambda i, b=int(mb * 2 ** 20), n=programs: layer(i, b, n))
            rows.append([f"seq+pf({mb:.1f} MB, {programs})", f"{us:.1f}"])
    print(f"{common.gpu_name()}: {T} rows, 2.9B shape, {L} weight sets; µs a layer "
          f"(median of {args.reps} graph replays)")
    print(common.table(["what", "µs a layer"], rows))


if __name__ == "__main__":
    main()
