"""Session 68: a batched prefill's time mix with the one-kernel token loop
(``decode_triton.time_mix_seq``) against the three launches, and the loop's launch options,
through the engine (``server.bench.prefill``'s engine case), 2.9B shape, fp16 state.

    python3 docs/experiments/session68/seq_variants.py [--rounds 2] [--cases 64x512,...]

Prints tok/s and the peak allocated memory of each case for each variant, rounds interleaved."""

from __future__ import annotations

import argparse

import torch

from server.bench import common
from server.bench.prefill import engine_case
from server.model.kernels import decode_triton as d

p = argparse.ArgumentParser()
p.add_argument("--rounds", type=int, default=2)
p.add_argument("--cases", default="64x512,16x1024,256x32,8x512")
p.add_argument("--variants", default="off;4,16,4;2,16,4;8,16,4;4,32,4;4,16,8",
               help="off, or per_sm,chunk,num_warps; separated by ;")
args = p.parse_args()
model = common.build_model("2.9b", None, "fp16", "fp16")
served = argparse.ArgumentParser()
common.product_options(served)
common.apply_product_options(model, served.parse_args([]))  # (as served)
print(f"# {common.gpu_name()}", flush=True)
for rnd in range(args.rounds):
    for var in args.variants.split(";"):
        on = var != "off"
        model._fused.seq_one_kernel = on
        if on:
            per_sm, chunk, warps = map(int, var.split(","))
            d.SEQ_VARIANT.update(per_sm=per_sm, chunk=chunk, num_warps=warps)
        cells = []
        for case in args.cases.split(","):
            n, length = map(int, case.split("x"))
            torch.cuda.reset_peak_memory_stats()
            r = engine_case(model, n, length, 3)
            cells.append(f"{case} {r['tokens'] / r['t_pre']:,.0f} tok/s "
                         f"(peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB)")
        print(f"round {rnd + 1} {var:>8}: " + " | ".join(cells), flush=True)
