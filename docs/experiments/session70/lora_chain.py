"""The LoRA stages of one layer as a batched prefill pass runs them above the skinny rows
(cuBLAS bmm, the in-place activation, bmm), over 32 layers' weights in turn, replayed from a
CUDA graph: padded stacks (4D rows, session 69) against packed ones (``fused.lora_stacks``,
3s + D), each with the two-group activation (session 69's, copied here) and the four-group one
that zeroes past each width (``fused_triton.lora_act_``). Which part of the 1 x 158 pass's
~1 % (session 70, call 3) the packing costs.

    python3 docs/experiments/session70/lora_chain.py [--rows 158,512] [--reps 200]
"""
import argparse

import torch
import triton
import triton.language as tl

from server.bench.common import cuda_graph
from server.model.fused import lora_stacks
from server.model.kernels import fused_triton as ft

C, LAYERS, DIMS = 2560, 32, [96, 128, 128, 256]  # the demo 2.9B's widths (v, w, a, g)


@triton.jit
def _act2_kernel(x_ptr, n, BLOCK: tl.constexpr):  # session 69's: tanh of group 1, sigmoid of 3
    g = tl.program_id(1)
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    o += (1 + 2 * g).to(tl.int64) * n
    x = tl.load(x_ptr + o, mask=m, other=0.0).to(tl.float32)
    y = tl.where(g == 0, 2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0, tl.sigmoid(x))
    tl.store(x_ptr + o, y.to(x_ptr.dtype.element_ty), mask=m)


def act2(h, lim):
    n = h[0].numel()
    _act2_kernel[(triton.cdiv(n, ft._ACT_BLOCK), 2)](h, n, BLOCK=ft._ACT_BLOCK,
                                                     num_warps=ft._ACT_WARPS)
    return h


def padded(dt):
    D = max(DIMS)
    a, b = torch.zeros(4, D, C, dtype=dt, device="cuda"), torch.zeros(4, C, D, dtype=dt,
                                                                        device="cuda")
    return a, b


def fill(a, b):
    for i, d in enumerate(DIMS):
        a[i, :d].normal_(std=0.02)
        b[i, :, :d].normal_(std=0.02)
    return a, b


def time_us(fn, reps):
    g = cuda_graph(fn)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            g.replay()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / reps / LAYERS)
    return sorted(times)[2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", default="158,512")
    p.add_argument("--reps", type=int, default=200)
    a = p.parse_args()
    dt = torch.float16
    lim = torch.tensor([[d, C] for d in DIMS], dtype=torch.int32, device="cuda")
    stacks = {"padded": [fill(*padded(dt)) for _ in range(LAYERS)],
              "packed": [fill(*lora_stacks(DIMS, C, dt, "cuda")) for _ in range(LAYERS)]}
    print(f"# {torch.cuda.get_device_name()} · torch {torch.__version__} · widths {DIMS}, "
          f"C {C}, µs a layer (median of 5 x {a.reps} replays of {LAYERS} layers)")
    print("| rows | stacks | activation | chain µs | 1st bmm µs | act µs | 2nd bmm µs |")
    print("|---|---|---|---|---|---|---|")
    for R in map(int, a.rows.split(",")):
        xs = torch.randn(4, R, C, dtype=dt, device="cuda")
        h = torch.empty(4, R, max(DIMS), dtype=dt, device="cuda")
        out = torch.empty(4, R, C, dtype=dt, device="cuda")
        for name, st in stacks.items():
            for act_name, act in (("2 groups", act2), ("4 groups, zeros", ft.lora_act_)):
                def chain():
                    for l1, l2 in st:
                        torch.bmm(xs, l1.transpose(1, 2), out=h)
                        act(h, lim)
                        torch.bmm(h, l2.transpose(1, 2), out=out)

                def first():
                    for l1, _ in st:
                        torch.bmm(xs, l1.transpose(1, 2), out=h)

                def acts():
                    for _ in st:
                        act(h, lim)

                def second():
                    for _, l2 in st:
                        torch.bmm(h, l2.transpose(1, 2), out=out)
                ts = [time_us(f, a.reps) for f in (chain, first, acts, second)]
                print(f"| {R} | {name} | {act_name} | " + " | ".join(f"{t:.2f}" for t in ts)
                      + " |", flush=True)


if __name__ == "__main__":
    main()
