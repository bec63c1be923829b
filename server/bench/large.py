"""Variants of a decode step's non-product kernels at large batch (run on the GPU machine).

    python -m server.bench large --batch 256,1024

At batch 1,024 (2.9B, fp16 state) an eager step's kernels spent (2026-11-29, before this
bench) 7.8 ms in the decode time mix (the state read and written: 21.5 GB a step), 1.2 ms in
`ln_mix` and 1.1 ms in the in-place activations (docs/performance.md). Each table times one
layer's call of a kernel under launch variants, with the bytes it must move and that rate:

* the state's streaming floor (`--only state_floor`): the same bytes read and written in place
  with no math, by torch and by a Triton tile copy of the time mix's geometry (one head's
  [64, 64] tile a program, or several), against which the time mix's rate is to be read;
* the decode time mix (`time_mix_decode`): warps, the state's load issued before the vector
  work (early), the state streamed past L2 (evict_first), heads a program; 32 layers' states
  and inputs in turn (one CUDA graph), so neither stays in L2 (`decode --time-mix` times
  variants in the whole step);
* `ln_mix`: the program's column chunk (today the whole row above 64 rows) and warps;
* `relu_sq_` on the FFN key's output: block x warps (today's first);
* the matrix products (cuBLAS), and the LoRA products split by their own sizes.
"""

import argparse
import itertools

import torch
import triton
import triton.language as tl

from server.bench import common
from server.model.kernels import decode_triton as dk
from server.model.kernels import fused_triton as ft

from .wkv import _graph_time_us as _graph_us  # median µs of a CUDA graph replay of fn()

H, N, LAYERS = 40, 64, 32  # 2.9B
C, FFN = H * N, 4 * H * N
DTYPES = {"fp16": torch.float16, "fp32": torch.float32}


def time_mix_table(B: int, state: str) -> None:
    """The decode time mix between its products (`time_mix_decode`) under launch variants."""
    dev, f16 = "cuda", torch.float16
    g = torch.Generator(device=dev).manual_seed(0)

    def rnd(*shape, dtype=f16, scale=1.0):
        return (torch.randn(*shape, generator=g, device=dev) * scale).to(dtype)

    S = rnd(LAYERS, B, H, N, N, scale=0.3, dtype=DTYPES[state])
    # each layer's own inputs, as in the step (session 9: the same figures as with inputs
    # shared by the 32 calls; variants faster here were still not faster in the step)
    r, k, v, vf = (rnd(LAYERS, B, C) for _ in range(4))
    lora = rnd(LAYERS, 4, B, C)
    w0, a0, v0 = (rnd(C) for _ in range(3))
    kk, ka, rk, lw, lb = (rnd(C, dtype=torch.float32) for _ in range(5))
    state_bytes = 2 * S[0].numel() * S.element_size()
    print(f"\n## decode time mix, batch {B}, {state} state ({state_bytes / 1e6:.0f} MB a layer "
          "read + written)\n| warps | early | evict | heads | stages | µs/layer | state TB/s |\n"
          "|---|---|---|---|---|---|---|")
    variants = [None]  # as the server launches it
    variants += [(w, False, "evict_first", 1, 1) for w in (1, 2, 4)]
    variants += [(w, False, "evict_first", h, st) for w, h, st in itertools.product(
        (1, 2), (2, 4, 8), (1, 2, 3))]
    for var in variants:
        opts = {} if var is None else dict(zip(("num_warps", "EARLY", "EVICT", "HEADS",
                                                "STAGES"), var))
        label = "(server) | | | |" if var is None else " | ".join(map(str, var))
        _layer_row(label, lambda i, o=opts: dk.time_mix_decode(
            S[i], r[i], k[i], v[i], lora[i], vf[i], None, w0, a0, v0, kk, ka, rk, lw, lb, 0.6,
            1e-5, **o), lambda us: f"{state_bytes / us * 1e-6:.2f}")


@triton.jit
def _tile_copy_kernel(S_ptr, TILES: tl.constexpr, N: tl.constexpr, EVICT: tl.constexpr):
    """TILES consecutive [N, N] state tiles a program, loaded and stored back in place."""
    i = tl.arange(0, TILES * N)
    j = tl.arange(0, N)
    p = S_ptr + tl.program_id(0).to(tl.int64) * TILES * N * N + i[:, None] * N + j[None, :]
    tl.store(p, tl.load(p, eviction_policy=EVICT), eviction_policy=EVICT)


def state_floor_table(B: int, state: str) -> None:
    """One layer's state read and written with no math: what the time mix's bytes can take."""
    S = torch.randn(LAYERS, B, H, N, N, device="cuda").to(DTYPES[state])
    S2 = torch.empty_like(S)
    state_bytes = 2 * S[0].numel() * S.element_size()
    print(f"\n## state streaming floor, batch {B}, {state} state ({state_bytes / 1e6:.0f} MB a "
          "layer read + written)\n| how | µs/layer | TB/s |\n|---|---|---|")

    def rate(us):
        return f"{state_bytes / us * 1e-6:.2f}"

    _layer_row("torch, in place (`mul_(1)`)", lambda i: S[i].mul_(1), rate)
    _layer_row("torch, to another buffer (`copy_`)", lambda i: S2[i].copy_(S[i]), rate)
    for tiles, warps, evict in itertools.product((1, 2, 4), (1, 2, 4, 8), ("evict_first", "")):
        _layer_row(f"tile copy: {tiles} tile(s) a program, {warps} warps, {evict or 'no hint'}",
                   lambda i, t=tiles, w=warps, e=evict: _tile_copy_kernel[(B * H // t,)](
                       S[i], TILES=t, N=N, EVICT=e, num_warps=w), rate)


def _layer_row(label: str, call, rate) -> None:
    """Print ``| label | µs a layer | rate(µs) |`` for ``call(i)`` over the 32 layers (one CUDA
    graph), or the failure in that row (the table goes on)."""
    def run():
        for i in range(LAYERS):
            call(i)
    try:
        us = _graph_us(run) / LAYERS
    except Exception as e:
        print(f"| {label} | failed: {e!r:.150} | |", flush=True)
        return
    print(f"| {label} | {us:.1f} | {rate(us)} |", flush=True)


def ln_mix_table(B: int) -> None:
    dev = "cuda"
    x = torch.randn(B, C, device=dev)
    lw, lb = torch.randn(C, device=dev), torch.randn(C, device=dev)
    prev = torch.randn(B, C, device=dev, dtype=torch.float16)
    write = torch.zeros(B, dtype=torch.int32, device=dev)
    print(f"\n## ln_mix, {B} rows (T = 1)\n| mixes | chunk | warps | µs | TB/s |\n"
          "|---|---|---|---|---|")
    saved = ft.LN_MIX_CHUNK, ft.LN_MIX_SPLIT_ROWS
    try:
        for M in (6, 1):
            mix = torch.rand(M, C, device=dev, dtype=torch.float16)
            nbytes = x.numel() * 4 + 2 * prev.numel() * 2 + M * B * C * 2
            for chunk, warps in ((None, None), (None, 4), (None, 16), (512, None),
                                 (1024, None), (2048, None)):
                if chunk is None:
                    ft.LN_MIX_CHUNK, ft.LN_MIX_SPLIT_ROWS = saved
                else:
                    ft.LN_MIX_CHUNK, ft.LN_MIX_SPLIT_ROWS = chunk, 1 << 30
                opts = {} if warps is None else {"num_warps": warps}

                def run():
                    for _ in range(LAYERS):
                        ft.ln_mix(x, lw, lb, prev, prev, write, mix, 1, 1e-5, torch.float16,
                                  **opts)
                us = _graph_us(run) / LAYERS
                print(f"| {M} | {chunk or 'row (today)'} | {warps or 'auto'} | {us:.1f} | "
                      f"{nbytes / us * 1e-6:.2f} |", flush=True)
    finally:
        ft.LN_MIX_CHUNK, ft.LN_MIX_SPLIT_ROWS = saved


def relu_table(B: int) -> None:
    xs = [torch.randn(B, FFN, device="cuda", dtype=torch.float16) for _ in range(4)]
    n = xs[0].numel()
    print(f"\n## relu_sq_ in place, [{B}, {FFN}] fp16\n| block | warps | µs | TB/s |\n"
          "|---|---|---|---|")
    for block, warps in ((ft._ACT_BLOCK, ft._ACT_WARPS), (2048, 4), (256, 2), (512, 4),
                         (1024, 4), (2048, 8), (2048, 16), (4096, 16)):
        def run():
            for i in range(LAYERS):
                ft._relu_sq_kernel[(-(-n // block),)](xs[i % 4], n, BLOCK=block,
                                                       num_warps=warps)
        us = _graph_us(run) / LAYERS
        print(f"| {block} | {warps} | {us:.1f} | {2 * n * 2 / us * 1e-6:.2f} |", flush=True)


def products_table(B: int) -> None:
    """The step's matrix products as fused.py calls them above its skinny rows (cuBLAS; here
    one at a time, without the LoRA side stream), each over 32 layers' weights (2.9B shapes),
    and the LoRA products split by their own sizes (w, a: 128, v: 96 padded to 128, gate 256)
    instead of all four padded to the largest (256)."""
    dev, f16, f32 = "cuda", torch.float16, torch.float32
    dims = {"w": 128, "a": 128, "v": 96, "g": 256}
    D, D3 = max(dims.values()), 128

    def rnd(*shape, dtype=f16):
        return (torch.randn(*shape, device=dev) * 0.02).to(dtype)

    rkv, wo, key, value = rnd(LAYERS, 3, C, C), rnd(LAYERS, C, C), rnd(LAYERS, FFN, C), rnd(
        LAYERS, C, FFN)
    lora1, lora2 = rnd(LAYERS, 4, D, C), rnd(LAYERS, 4, C, D)
    l1_3, l1_g, l2_3, l2_g = rnd(LAYERS, 3, D3, C), rnd(LAYERS, D, C), rnd(LAYERS, 3, C, D3), rnd(
        LAYERS, C, D)
    head = rnd(65536, C)
    xs, h, h3, hg = rnd(6, B, C), rnd(4, B, D), rnd(3, B, D3), rnd(B, D)
    xk, hk, o = rnd(B, C), rnd(B, FFN), rnd(B, C)
    resid = torch.zeros(B, C, device=dev, dtype=f32)
    n_lora = sum(dims.values())
    cases = {  # name: (one layer's call, its FLOPs counting only the real LoRA sizes)
        "rkv (bmm 3)": (lambda i: torch.bmm(xs[:3], rkv[i].transpose(1, 2)), 3 * C * C),
        "lora 1st, 4 padded": (lambda i: torch.bmm(xs[2:6], lora1[i].transpose(1, 2)),
                               n_lora * C),
        "lora 1st, 3 + gate": (lambda i: (torch.bmm(xs[2:5], l1_3[i].transpose(1, 2)),
                                          xs[5] @ l1_g[i].t()), n_lora * C),
        "lora 2nd, 4 padded": (lambda i: torch.bmm(h, lora2[i].transpose(1, 2)), n_lora * C),
        "lora 2nd, 3 + gate": (lambda i: (torch.bmm(h3, l2_3[i].transpose(1, 2)),
                                          hg @ l2_g[i].t()), n_lora * C),
        "output (addmm fp32)": (lambda i: torch.addmm(resid, o, wo[i].t(), out_dtype=f32,
                                                      out=resid), C * C),
        "ffn key": (lambda i: torch.nn.functional.linear(xk, key[i]), FFN * C),
        "ffn value (addmm fp32)": (lambda i: torch.addmm(resid, hk, value[i].t(),
                                                         out_dtype=f32, out=resid), FFN * C),
        "head (fp32 out)": (lambda i: torch.mm(xk, head.t(), out_dtype=f32), 65536 * C),
    }
    print(f"\n## products, {B} rows (fp16, 32 layers' weights in turn)\n"
          "| product | µs a call | TFLOP/s (real sizes) |\n|---|---|---|")
    for name, (fn, params) in cases.items():
        _layer_row(name, fn, lambda us, p=params: f"{2 * B * p / us * 1e-6:.0f}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="server.bench large", description=__doc__.splitlines()[0])
    p.add_argument("--batch", default="256,1024", help="comma-separated batch sizes")
    p.add_argument("--only", choices=("time_mix", "state_floor", "ln_mix", "relu", "products"),
                   help="one table only")
    p.add_argument("--state-dtype", default="fp16,fp32", type=common.dtype_list, help="time-mix table: state dtypes")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("server.bench large needs a CUDA device")
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for B in map(int, args.batch.split(",")):
        if args.only in (None, "time_mix"):
            for state in args.state_dtype.split(","):
                time_mix_table(B, state)
        if args.only in (None, "state_floor"):
            for state in args.state_dtype.split(","):
                state_floor_table(B, state)
        for name, fn in (("ln_mix", ln_mix_table), ("relu", relu_table),
                         ("products", products_table)):
            if args.only in (None, name):
                fn(B)


if __name__ == "__main__":
    main()
