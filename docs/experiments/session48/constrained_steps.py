"""Where a constrained decode step's time goes (session 48): a pulse of 32 steps at batch B
with one row under the decode bench's grammar (``decode.constrained_rows``), the Guide's
methods timed on the host (perf_counter; on CUDA the wait inside ``finish`` is the host
waiting for the last step's tokens) against the same pulse unconstrained.

    python3 docs/experiments/session48/constrained_steps.py --preset 2.9b --batch 1,32
"""
import argparse
import statistics
import time

import torch

from server.bench import common
from server.bench.decode import constrained_rows
from server.scheduler import guide as guide_mod
from server.task import constraint as constraint_mod

TIMES: dict[str, list[float]] = {}


def timed(name, fn):
    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            TIMES.setdefault(name, []).append(time.perf_counter() - t0)
    return wrapper


def patch():
    G = guide_mod.Guide
    G.apply = timed("Guide.apply (all)", G.apply)
    G.finish = timed("  Guide.finish (wait + accept)", G.finish)
    G.record = timed("Guide.record", G.record)
    guide_mod.fill_masks = timed("  fill_masks (llguidance)", guide_mod.fill_masks)
    C = constraint_mod.Constraint
    C.accept = timed("    Constraint.accept", C.accept)
    C.arm = timed("  Constraint.arm", C.arm)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="2.9b")
    p.add_argument("--device", default=None, type=common.device_arg)
    p.add_argument("--dtype", default="fp16")
    p.add_argument("--batch", default="1,32")
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--pulses", type=int, default=5)
    p.add_argument("--rows", default="1", help="comma-separated: constrained rows (at most "
                   "the batch; 'all': every row) timed against none")
    args = p.parse_args()
    model = common.build_model(args.preset, args.device, args.dtype, "fp32")
    model.state_dtype = torch.float16
    patch()
    from server.scheduler.engine import BatchEngine
    print(f"# constrained steps · {args.preset} · {common.gpu_name()}")
    for B in map(int, args.batch.split(",")):
        for k in sorted({0} | {B if r == "all" else min(int(r), B)
                               for r in args.rows.split(",")}):
            engine = BatchEngine(model)
            engine.resize(B, [])
            slots = list(range(B))
            tasks = [common.DummyTask(seed=i) for i in slots]
            constrained_rows(tasks, k)
            engine.load(slots, tasks)
            engine.start(slots, [100 + i for i in slots], [1 << 30] * B)
            engine.pulse(args.steps)  # warm-up (graphs, kernels)
            TIMES.clear()
            pulse_ms = []
            for _ in range(args.pulses):
                ended = [i for i in slots if engine.live[i].item() is False]
                if ended:
                    engine.start(ended, [1] * len(ended), [1 << 30] * len(ended))
                dt, res = common.timed(lambda: engine.pulse(args.steps), model.device)
                pulse_ms.append(dt * 1e3 / max(res.steps, 1))
            print(f"\n## batch {B}, {k} rows constrained: {statistics.median(pulse_ms):.3f} "
                  f"ms/step (median of {args.pulses} pulses of {args.steps} steps)")
            steps = args.pulses * args.steps
            for name, ts in TIMES.items():
                print(f"{name:40s} {sum(ts) / steps * 1e3:8.3f} ms/step  "
                      f"({len(ts)} calls, median {statistics.median(ts) * 1e6:.0f} us)")
            engine = None
            model.clear_graphs()


if __name__ == "__main__":
    main()
