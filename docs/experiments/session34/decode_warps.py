"""Decode's whole-row ln_mix programs (above ``LN_MIX_SPLIT_ROWS`` rows) with 8 warps (as
served before 2b95113) against 4 (since), each set explicitly, through ``server.bench.decode``'s engine pulses (fp16 state, 32 steps a
pulse), the two alternating. GPU machine:
    python3 docs/experiments/session34/decode_warps.py [ROUNDS] [BATCHES]
Prints ms a step (median pulse of 5) per round."""

import statistics
import sys

import torch

from server.bench import common
from server.bench.decode import bench_batch
from server.model.kernels import fused_triton

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
BATCHES = [int(b) for b in (sys.argv[2] if len(sys.argv) > 2 else "256,1024").split(",")]
served = fused_triton.ln_mix


def with_warps(warps):
    def ln_mix(x, *args, **kw):
        if args[6] == 1 and x.shape[0] > fused_triton.LN_MIX_SPLIT_ROWS:  # T == 1, whole rows
            kw.setdefault("num_warps", warps)
        return served(x, *args, **kw)
    return ln_mix


model = common.build_model("2.9b", "cuda", "fp16", "fp16")
results = {(w, b): [] for w in (8, 4) for b in BATCHES}
for _ in range(ROUNDS):
    for warps in (8, 4):
        fused_triton.ln_mix = with_warps(warps)
        for B in BATCHES:
            r = bench_batch(model, B, 32, 5)
            results[(warps, B)].append(r["dt"] / r["steps"] * 1e3)
print(f"\n2.9b, fp16 state, {torch.cuda.get_device_name()}, {ROUNDS} rounds")
print("| ln_mix warps | " + " | ".join(f"batch {b}: ms a step (rounds)" for b in BATCHES) + " |")
print("|---|" + "---|" * len(BATCHES))
for w in (8, 4):
    print(f"| {w} | " + " | ".join(
        f"{statistics.median(results[(w, b)]):.3f} ("
        + ", ".join(f"{x:.3f}" for x in results[(w, b)]) + ")" for b in BATCHES) + " |")
