"""The chunked WKV at a cached chat turn's length (160 tokens, one sequence, 40 heads): the prep
kernel's warps and the scan's row block and warps, timed (µs a call in a CUDA graph of 32
calls, median of 5 rounds) and compared bit for bit with the served configuration (prep 4 warps, scan
32 rows, 4 warps). Run on the GPU machine: python3 docs/experiments/session44/wkv_configs.py"""

import statistics

import torch

from server.model.kernels import wkv_triton as W

B, T, H, N = 1, 160, 40, 64
g = torch.Generator(device="cuda").manual_seed(0)


def rnd(*shape, lo=None):
    x = torch.randn(*shape, device="cuda", generator=g)
    return x


r, k, v = (rnd(B, T, H, N).half() for _ in range(3))
w = torch.exp(-0.6 * torch.rand(B, T, H, N, device="cuda", generator=g)).half()
kap = torch.nn.functional.normalize(rnd(B, T, H, N), dim=-1).half()
a = torch.sigmoid(rnd(B, T, H, N)).half()
S0 = (0.1 * rnd(B, H, N, N)).half()


def run(prep_warps, rows, scan_warps):
    S = S0.clone()
    ws = W.chunk_prep(r, w, k, v, kap, a, warps=prep_warps)
    y = W.chunk_scan(S, ws, T, r.dtype, rows=rows, warps=scan_warps, round_chunks=True)
    return y, S, ws


def timed(fn, calls=32, n=50):
    """µs a call: ``calls`` calls captured in one CUDA graph (as a pass's 32 layers run them:
    no launch overhead), replayed ``n`` times a round, median of 5 rounds."""
    fn()  # compiled
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    out = []
    for _ in range(5):
        graph.replay()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n):
            graph.replay()
        e1.record()
        torch.cuda.synchronize()
        out.append(e0.elapsed_time(e1) * 1000 / n / calls)
    return statistics.median(out)


base_y, base_S, base_ws = run(4, 32, 4)
print("| prep warps | scan rows | scan warps | prep µs | scan µs | y bits equal | S bits equal |")
print("|---|---|---|---|---|---|---|")
for pw, rows, sw in [(4, 32, 4), (8, 32, 4), (2, 32, 4), (4, 16, 4), (4, 16, 2), (4, 32, 2),
                     (4, 64, 4), (4, 64, 8), (8, 16, 2), (4, 32, 4)]:
    y, S, ws = run(pw, rows, sw)
    tp = timed(lambda: W.chunk_prep(r, w, k, v, kap, a, warps=pw))
    St = S0.clone()
    ts = timed(lambda: W.chunk_scan(St, base_ws, T, r.dtype, rows=rows, warps=sw,
                                    round_chunks=True))
    print(f"| {pw} | {rows} | {sw} | {tp:.1f} | {ts:.1f} | {torch.equal(y, base_y)} | "
          f"{torch.equal(S, base_S)} |", flush=True)
