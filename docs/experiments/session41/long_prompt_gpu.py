"""A long prompt arriving while NDEC streams decode, through the scheduler in process (no HTTP):
the long prompt's time to its first token, the streams' tokens/s meanwhile, and the pulses'
lengths. Run with a tree on PYTHONPATH to compare trees (session 41: the pulse cut, 071c5c2,
against its parent 1bef54c).

    PYTHONPATH=<tree> python long_prompt_gpu.py --preset 2.9b --ndec 64,255 --lengths 16384,65536
"""
import argparse
import random
import statistics
import time

import torch

import server.scheduler.cycle as cyc
from server.bench.stress import load, warm_up
from server.scheduler import DynamicScheduler

p = argparse.ArgumentParser()
p.add_argument("--preset", default="2.9b")
p.add_argument("--ndec", default="64,255")
p.add_argument("--lengths", default="16384,65536")
p.add_argument("--rounds", type=int, default=2)
a = p.parse_args()
a.model = None
a.device = None
a.dtype = None
a.state_dtype = None
print("code:", cyc.__file__, flush=True)
loader = load(a)
s = DynamicScheduler(loader, max_batch_size=256, buffer_size=32)
print(f"warm-up {warm_up(s, loader):.1f} s", flush=True)
rng = random.Random(0)
for rnd in range(a.rounds):
    for ndec in map(int, a.ndec.split(",")):
        for n in map(int, a.lengths.split(",")):
            streams = [s.new_task(f"User: tell story {i} {rnd}\n\nAssistant:", max_tokens=100000,
                                  temperature=1.0, seed=i) for i in range(ndec)]
            while not all(t.output for t in streams):
                s.step()
            for _ in range(3):
                s.step()
            k0, o0 = len(s.pulses), sum(len(t.output) for t in streams)
            c = s.new_task(rng.choices(range(1000, 60000), k=n), max_tokens=1, temperature=0)
            t0 = time.perf_counter()
            steps = 0
            while not c.output:
                s.step()
                steps += 1
            dt = time.perf_counter() - t0
            toks = sum(len(t.output) for t in streams) - o0
            ps = [q["steps"] for q in list(s.pulses)[k0:]]
            print(f"round {rnd} ndec {ndec} prompt {n}: first token {dt * 1000:.0f} ms "
                  f"({n / dt:,.0f} prompt tok/s), streams {toks / dt:,.0f} tok/s, "
                  f"{len(ps)} pulses, steps median {statistics.median(ps) if ps else 0}",
                  flush=True)
            for t in streams:
                t.stop()
            while s.decoding:
                s.step()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
s.shutdown()
