"""The channel mix's products at prefill rows (CUDA): the form served against the FFN's hidden
dimension cut in two halves whose key -> relu^2 -> value chains run on two streams (session 28,
docs/performance.md: slower, not adopted). One CUDA graph over 8 layers' distinct random
weights (past the L2), us a layer, median and minimum of 30 replays; then whether the halves
form keeps a row's bits at every row count.

    python3 -m server.bench.ffn_halves 2560      # the 2.9B width (4096: 7.2B)
"""
import sys

import torch
import torch.nn.functional as F

from server.bench import common
from server.model.kernels import fused_triton as k

L = 8


def served(x, xk, key, val, hid, C):
    h = k.relu_sq_(F.linear(xk, key))
    n = hid // 2
    parts = torch.bmm(h.view(-1, 2, n).transpose(0, 1), val.view(C, 2, n).permute(1, 2, 0),
                      out_dtype=torch.float32)
    k.add_parts_(x, parts)


def halves(x, xk, key, val, hid, C, side, two_streams=True):
    n, R = hid // 2, x.shape[0]
    parts = torch.empty(2, R, C, device=x.device, dtype=torch.float32)
    main = torch.cuda.current_stream()
    if two_streams:
        side.wait_stream(main)
    for s in range(2):
        with torch.cuda.stream(side if (two_streams and s == 1) else main):
            h = k.relu_sq_(F.linear(xk, key[s * n:(s + 1) * n]))
            torch.mm(h, val[:, s * n:(s + 1) * n].t(), out_dtype=torch.float32, out=parts[s])
    if two_streams:
        main.wait_stream(side)
    k.add_parts_(x, parts)


def graph_time(fn, R, C, keys, vals, reps=30):
    dev = keys[0].device
    xs = [torch.randn(R, C, device=dev) for _ in range(L)]
    xks = [torch.randn(R, C, device=dev, dtype=torch.float16) for _ in range(L)]

    def run():
        for i in range(L):
            fn(xs[i], xks[i], keys[i], vals[i])
    g = common.cuda_graph(run)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    ts = [t / L for t in common.replay_us(g, reps)]
    return ts[len(ts) // 2], ts[0]


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    C = int(argv[0]) if argv else 2560
    hid, dev = 4 * C, torch.device("cuda")
    torch.manual_seed(0)
    keys = [torch.randn(hid, C, device=dev, dtype=torch.float16) * 0.02 for _ in range(L)]
    vals = [torch.randn(C, hid, device=dev, dtype=torch.float16) * 0.02 for _ in range(L)]
    side = torch.cuda.Stream(dev)
    forms = (("served", lambda *a: served(*a, hid, C)),
             ("halves 1 stream", lambda *a: halves(*a, hid, C, side, two_streams=False)),
             ("halves 2 streams", lambda *a: halves(*a, hid, C, side)))
    print(f"C={C} HID={hid}, us per layer (median/min), {L} layers' weights in one graph")
    for R in (16, 48, 160, 192, 256):
        row = [str(R)]
        for name, fn in forms:
            med, low = graph_time(fn, R, C, keys, vals)
            row.append(f"{name} {med:.1f}/{low:.1f}")
        print(" | ".join(row), flush=True)
    torch.manual_seed(1)
    x0 = torch.randn(1024, C, device=dev)
    xk = torch.randn(1024, C, device=dev, dtype=torch.float16)
    ref = x0.clone()
    halves(ref, xk, keys[0], vals[0], hid, C, side)
    for R in (16, 32, 48, 64, 96, 128, 160, 176, 192, 224, 256, 512):
        x = x0[:R].clone()
        halves(x, xk[:R], keys[0], vals[0], hid, C, side)
        torch.cuda.synchronize()
        print(f"halves rows {R}: same bits as in 1024 rows: {torch.equal(x, ref[:R])}", flush=True)


if __name__ == "__main__":
    main()
