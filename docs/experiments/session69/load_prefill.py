"""Session 69: a served load's prefill calls replayed on one model, its rows grouped into passes
as before session 69 (``prefill_tokens`` alone) and by ``pass_groups.plan_passes``, alternating.

The calls (each a list of prompt lengths) are ``pass_shapes.py --dump``'s: the prefiller's steps
for ``server.bench memory --load 256`` (CPU, CUDA's budgets). Each call runs on a fresh state of
its rows (random tokens; the served engine gathers scattered slots' rows, not counted here).
The rows go in as the engine hands them over: in the prefiller's order before session 69,
longest first since (its gather's order: each pass is then consecutive rows of the state).
Prints, a variant and round: seconds for all calls (the device synchronised), prompt tokens a
second, passes, padded tokens, and the peak allocated above the model and states.

    python3 docs/experiments/session69/load_prefill.py [--preset 2.9b] [--rounds 2]
"""
import argparse
import json
import time
from pathlib import Path

import torch

import server.model.forward as fw
from server.bench import common

HERE = Path(__file__).parent


def cap_only(widths, cap):
    """The grouping before session 69: as many rows a pass as the longest row's width allows."""
    per = max(1, cap // widths[0])
    return [(a, min(a + per, len(widths))) for a in range(0, len(widths), per)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="2.9b")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--calls", default=str(HERE / "load_calls.json"))
    args = p.parse_args()
    calls = json.loads(Path(args.calls).read_text())
    model = common.build_model(args.preset, None, "fp16", "fp16")
    g = torch.Generator().manual_seed(0)
    lists = [[torch.randint(0, model.cfg.vocab_size, (n,), generator=g).tolist() for n in c]
             for c in calls]
    states = [model.new_state(len(c)) for c in calls]
    shapes = []
    real_forward = model._forward_padded

    def spy(parts, *a, **k):
        shapes.append((len(parts), model._pass_width(max(map(len, parts)))))
        return real_forward(parts, *a, **k)

    model._forward_padded = spy
    plan = fw.plan_passes
    print(f"{args.preset}, {len(calls)} calls, {sum(map(len, calls))} rows, "
          f"{sum(map(sum, calls)):,} tokens · {common.gpu_name()}")
    variants = {"cap only": cap_only, "plan_passes": plan}
    # as the engine hands them over: before, in the prefiller's order; since session 69,
    # longest first (the engine's gather), so that each pass is consecutive rows, views
    ordered = {"cap only": lists,
               "plan_passes": [sorted(t, key=len, reverse=True) for t in lists]}
    for name in variants:  # warm-up: every kernel compiled at these shapes
        fw.plan_passes = variants[name]
        for toks, st in zip(ordered[name], states):
            model.prefill(toks, st, logits=True)
    common.sync(model.device)
    for r in range(args.rounds):
        for name, fn in variants.items():
            fw.plan_passes = fn
            shapes.clear()
            common.free_memory()
            base = torch.cuda.memory_allocated() if torch.cuda.is_available() else 0
            common.sync(model.device)
            t0 = time.perf_counter()
            for toks, st in zip(ordered[name], states):
                model.prefill(toks, st, logits=True)
            common.sync(model.device)
            dt = time.perf_counter() - t0
            peak = (torch.cuda.max_memory_allocated() - base) / 2**30 \
                if torch.cuda.is_available() else 0.0
            print(f"round {r} {name:12s} {dt * 1e3:8.1f} ms  "
                  f"{sum(map(sum, calls)) / dt:9,.0f} tok/s  {len(shapes):3d} passes  "
                  f"{sum(a * b for a, b in shapes):7,d} padded tokens  largest pass "
                  f"{max(a * b for a, b in shapes):6,d}  peak above the start {peak:.2f} GiB",
                  flush=True)
    fw.plan_passes = plan


if __name__ == "__main__":
    main()
