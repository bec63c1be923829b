"""A single sequence's prefill pass at 2.9B with and without PDL in the prefill chain
(``pdl.PREFILL_MAX_ROWS``) and with 8 or 4 warps in ln_mix's whole-row programs
(``fused_triton.LN_MIX_WARPS``), configurations alternating, graphs captured again for each.
Its knobs exist only with ``prefill_pdl.patch`` (this folder) applied to d5210f1 (session 34's
first GPU call ran it so; neither the patch nor the knobs were kept: ``prefill_pdl.log``):
    git apply docs/experiments/session34/prefill_pdl.patch
GPU machine:  python3 docs/experiments/session34/prefill_pdl.py [ROUNDS] [REPS]
Prints ms a pass (CUDA events, median of REPS) per length and configuration, whether each
configuration's logits equal the first one's (PDL must not change a bit), and whether a
160-token prompt fed as 144 + 16 ends in the bits of one pass (split invariance)."""

import statistics
import sys

import torch

from server.bench import common
from server.model.kernels import fused_triton, pdl

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
LENGTHS = (160, 1888, 4096)
CONFIGS = {"base": (0, 8), "pdl": (256, 8), "warps4": (0, 4), "pdl+warps4": (256, 4)}

torch.manual_seed(0)
model = common.build_model("2.9b", "cuda", "fp16", "fp32")
V = model.cfg.vocab_size
prompts = {n: torch.randint(100, V, (n,)).tolist() for n in LENGTHS}


def configure(name):
    pdl.PREFILL_MAX_ROWS, fused_triton.LN_MIX_WARPS = CONFIGS[name]
    gp = model._graphed_prefill
    gp.graphs, gp.pool = {}, None  # captured again with this configuration's launches


def run(tokens):
    st = model.new_state(1)
    logits = model.prefill([tokens], st)
    return logits, st


def time_pass(tokens):
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


results = {name: {n: [] for n in LENGTHS} for name in CONFIGS}
ref_logits, same = {}, {}
for rnd in range(ROUNDS):
    for name in CONFIGS:
        configure(name)
        for n in LENGTHS:
            logits, _ = run(prompts[n])  # capture + warm
            key = CONFIGS[name][1]  # logits compared among configurations of the same warps
            if (key, n) not in ref_logits:
                ref_logits[(key, n)] = logits
            same.setdefault(name, []).append(torch.equal(logits, ref_logits[(key, n)]))
            results[name][n].append(time_pass(prompts[n]))
        if rnd == 0:  # split invariance at 160 tokens under this configuration
            t = prompts[160]
            whole_logits, whole = run(t)
            st = model.new_state(1)
            model.prefill([t[:144]], st, logits=False)
            part_logits = model.prefill([t[144:]], st)
            ok = torch.equal(part_logits, whole_logits) and torch.equal(st.wkv, whole.wkv) \
                and torch.equal(st.shift, whole.shift)
            print(f"{name}: 160 as 144 + 16 keeps the bits: {ok}", flush=True)

print(f"\n{torch.cuda.get_device_name()}, {ROUNDS} rounds, median of {REPS} passes each")
print("| configuration | " + " | ".join(f"{n} tokens ms (rounds)" for n in LENGTHS)
      + " | logits equal within same warps |")
print("|---|" + "---|" * len(LENGTHS) + "---|")
for name in CONFIGS:
    cells = [f"{statistics.median(v):.3f} ({', '.join(f'{x:.3f}' for x in v)})"
             for v in results[name].values()]
    print(f"| {name} | " + " | ".join(cells) + f" | {all(same[name])} |")
