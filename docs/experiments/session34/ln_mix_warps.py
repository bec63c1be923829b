"""ln_mix's whole-row prefill programs with 8 warps (before session 34) against 4 (since): a
single sequence's pass at PRESET, the two alternating, graphs captured again for each.
GPU machine:  python3 docs/experiments/session34/ln_mix_warps.py PRESET [ROUNDS] [REPS]
Prints ms a pass (CUDA events, median of REPS passes; one figure per round)."""

import statistics
import sys

import torch

from server.bench import common
from server.model.kernels import fused_triton

PRESET = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
REPS = int(sys.argv[3]) if len(sys.argv) > 3 else 20
LENGTHS = (160, 1888, 4096)
served = fused_triton.ln_mix


def with_warps(warps):
    def ln_mix(x, *args, split=True, **kw):
        T = args[6]  # (x; ln_w, ln_b, prev, new_prev, write, mix, T, ...)
        if T > 1 and not split:
            kw.setdefault("num_warps", warps)
        return served(x, *args, split=split, **kw)
    return ln_mix


torch.manual_seed(0)
model = common.build_model(PRESET, "cuda", "fp16", "fp32")
V = model.cfg.vocab_size
prompts = {n: torch.randint(100, V, (n,)).tolist() for n in LENGTHS}
results = {w: {n: [] for n in LENGTHS} for w in (8, 4)}
for _ in range(ROUNDS):
    for warps in (8, 4):
        fused_triton.ln_mix = with_warps(warps)
        gp = model._graphed_prefill
        gp.graphs, gp.pool = {}, None
        for n in LENGTHS:
            model.prefill([prompts[n]], model.new_state(1))  # capture + warm
            times = []
            for _ in range(REPS):
                st = model.new_state(1)
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                model.prefill([prompts[n]], st)
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b))
            results[warps][n].append(statistics.median(times))
print(f"\n{PRESET}, {torch.cuda.get_device_name()}, {ROUNDS} rounds, median of {REPS} passes each")
print("| ln_mix warps | " + " | ".join(f"{n} tokens ms (rounds)" for n in LENGTHS) + " |")
print("|---|" + "---|" * len(LENGTHS))
for warps, by_n in results.items():
    print(f"| {warps} | " + " | ".join(
        f"{statistics.median(v):.3f} ({', '.join(f'{x:.3f}' for x in v)})"
        for v in by_n.values()) + " |")
