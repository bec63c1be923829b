"""Launch shapes of the element-wise kernels never swept inside the whole step (session 34's
"Next", item 1): the activations and ``add_parts_`` (BLOCK, warps; served 1,024 and 8) and
``pre_wkv`` / ``post_wkv`` (warps; served 4). Decode steps at BATCHES (fp16 state, 32-step
pulses, median of 5, ``server.bench.decode.bench_batch``: graphs captured again each time) and
single-sequence prefill passes of LENGTHS tokens (CUDA events, median of REPS passes, prefill
graphs captured again for each configuration), configurations alternating in each round.
GPU machine:
    python3 docs/experiments/session35/launch_shapes.py [ROUNDS] [BATCHES] [LENGTHS] [REPS]
Prints ms a step / a pass per configuration (median of the rounds, then each round)."""

import statistics
import sys

import torch

from server.bench import common
from server.bench.decode import bench_batch
from server.model.kernels import fused_triton as ft

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
BATCHES = [int(b) for b in (sys.argv[2] if len(sys.argv) > 2 else "256,1024").split(",") if b]
LENGTHS = [int(n) for n in (sys.argv[3] if len(sys.argv) > 3 else "160,4096").split(",") if n]
REPS = int(sys.argv[4]) if len(sys.argv) > 4 else 20


class Warps:
    """A Triton kernel whose launches take ``num_warps`` from here instead of the caller."""

    def __init__(self, kernel, warps):
        self.kernel, self.warps = kernel, warps

    def __getitem__(self, grid):
        launch = self.kernel[grid]
        return lambda *a, **kw: launch(*a, **{**kw, "num_warps": self.warps})


SERVED = dict(act=(ft._ACT_BLOCK, ft._ACT_WARPS), pre=ft._pre_wkv_kernel, post=ft._post_wkv_kernel)
# name: (activation/add_parts (BLOCK, warps), pre_wkv warps, post_wkv warps); None: as served
CONFIGS = {
    "served": ((1024, 8), None, None),
    "act 1024x4": ((1024, 4), None, None),
    "act 2048x8": ((2048, 8), None, None),
    "act 512x4": ((512, 4), None, None),
    "pre/post 2": ((1024, 8), 2, 2),
    "pre/post 8": ((1024, 8), 8, 8),
}


def configure(act, pre, post):
    ft._ACT_BLOCK, ft._ACT_WARPS = act
    ft._pre_wkv_kernel = SERVED["pre"] if pre is None else Warps(SERVED["pre"], pre)
    ft._post_wkv_kernel = SERVED["post"] if post is None else Warps(SERVED["post"], post)


def prefill_ms(model, tokens):
    gp = model._graphed_prefill
    gp.graphs, gp.pool = {}, None
    model.prefill([tokens], model.new_state(1))  # capture + warm
    times = []
    for _ in range(REPS):
        st = model.new_state(1)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        model.prefill([tokens], st)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


torch.manual_seed(0)
model = common.build_model("2.9b", "cuda", "fp16", "fp16")
prompts = {n: torch.randint(100, model.cfg.vocab_size, (n,)).tolist() for n in LENGTHS}
cols = [f"decode {b}" for b in BATCHES] + [f"prefill {n}" for n in LENGTHS]
res = {c: {col: [] for col in cols} for c in CONFIGS}
logits = {}
for _ in range(ROUNDS):
    for name, cfg in CONFIGS.items():
        configure(*cfg)
        for B in BATCHES:
            r = bench_batch(model, B, 32, 5)
            res[name][f"decode {B}"].append(r["dt"] / r["steps"] * 1e3)
        for n in LENGTHS:
            res[name][f"prefill {n}"].append(prefill_ms(model, prompts[n]))
            st = model.new_state(1)
            logits.setdefault(n, {})[name] = model.prefill([prompts[n]], st).cpu()
configure(*CONFIGS["served"])
print(f"\n2.9b, fp16 weights and state, {torch.cuda.get_device_name()}, {ROUNDS} rounds; "
      "ms a step (decode) / a pass (prefill)")
print("| configuration | " + " | ".join(cols) + " |")
print("|---|" + "---|" * len(cols))
for name, by in res.items():
    print(f"| {name} | " + " | ".join(
        f"{statistics.median(v):.3f} ({', '.join(f'{x:.3f}' for x in v)})" for v in by.values())
        + " |")
for n, by in logits.items():
    same = [name for name, lg in by.items() if torch.equal(lg, by["served"])]
    print(f"prefill {n}: logits bit-equal to served's: {', '.join(same)}")
