"""Pulse lengths and the long prompt's first token with two streams decoding (tiny model,
CPU); `long`: prompts of 2,000 and 6,000 tokens. Written by session 40's review helper.

    PYTHONPATH=<tree> python pulse_cut_measure.py long
"""
import os, sys, time, random
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch
torch.set_num_threads(1)
from server.model.loader import RWKV070ModelLoader
from server.scheduler.dynamic import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
import server.scheduler.cycle as cyc
print("code:", cyc.__file__)
P = "/tmp/review40b/tiny.pth"
if not os.path.exists(P):
    from server.model.random import main as mk
    mk([P, "--preset", "tiny", "--seed", "1"])
L = RWKV070ModelLoader(P, device="cpu")
which = sys.argv[1:] or ["steady", "long", "stop", "cache", "small_bs", "arrivals"]

def pulses(s, k0):
    return [p["steps"] for p in list(s.pulses)[k0:]]

if "steady" in which:
    s = DynamicScheduler(L, max_batch_size=2, buffer_size=32, prefill_chunk=64)
    a = s.new_task("User: hi\n\nAssistant:", max_tokens=2000, temperature=0)
    b = s.new_task("User: yo\n\nAssistant:", max_tokens=2000, temperature=0)
    for _ in range(20): s.step()
    print("steady pulses", pulses(s, 0))
    s.shutdown()

if "long" in which:
    for n in (2000, 6000):
        s = DynamicScheduler(L, max_batch_size=3, buffer_size=32, prefill_chunk=512)
        a = s.new_task("User: hi\n\nAssistant:", max_tokens=100000, temperature=0)
        b = s.new_task("User: yo\n\nAssistant:", max_tokens=100000, temperature=0)
        for _ in range(8): s.step()
        k0 = len(s.pulses); o0 = len(a.output) + len(b.output)
        c = s.new_task(list(random.Random(0).choices(range(1000, 60000), k=n)), max_tokens=1, temperature=0)
        t0 = time.perf_counter(); st = 0
        while not c.output:
            s.step(); st += 1
        dt = time.perf_counter() - t0
        dec = len(a.output) + len(b.output) - o0
        ps = pulses(s, k0)
        print(f"long n={n}: ttft {dt:.2f}s steps {st} pulses {len(ps)} lens {ps[:12]}... decode toks {dec} ({dec/dt:.0f}/s)")
        s.shutdown()

if "stop" in which:
    s = DynamicScheduler(L, max_batch_size=3, buffer_size=32, prefill_chunk=64)
    a = s.new_task("User: hi\n\nAssistant:", max_tokens=100000, temperature=0)
    for _ in range(8): s.step()
    c = s.new_task(list(range(1000, 1600)), max_tokens=5, temperature=0)
    s.step(); s.step()
    c.stop()
    k0 = len(s.pulses)
    for _ in range(6): s.step()
    print("stop: c pending", len(c.pending), "status", c.status, "pulses after stop", pulses(s, k0))
    s.shutdown()

if "cache" in which:
    cache = PrefixCache(64 << 20, device="cpu", min_tokens=2)
    s = DynamicScheduler(L, max_batch_size=4, buffer_size=32, prefill_chunk=128, prefix_cache=cache)
    a = s.new_task("User: hi\n\nAssistant:", max_tokens=100000, temperature=0)
    for _ in range(8): s.step()
    pre = list(random.Random(1).choices(range(1000, 60000), k=600))
    ts = []
    for i in range(2):
        t = s.new_task(pre + [2000 + i] * 5, max_tokens=3, temperature=0); t.cache_origin = ""; ts.append(t)
    k0 = len(s.pulses); st = 0
    while not all(t.output for t in ts) and st < 100:
        s.step(); st += 1
        print("  step", st, "pending", [len(t.pending) for t in ts], "pulse", s.pulses[-1]["steps"])
    print("cache: steps", st, "pulses", pulses(s, k0))
    s.shutdown()

if "small_bs" in which:
    for bs, aw in ((2, 0), (3, 0), (4, 0), (8, 0), (3, 4), (32, 0)):
        s = DynamicScheduler(L, max_batch_size=2, buffer_size=bs, prefill_chunk=32)
        s.admit_wait = aw
        a = s.new_task("User: hi\n\nAssistant:", max_tokens=100000, temperature=0)
        for _ in range(8): s.step()
        c = s.new_task(list(range(1000, 1300)), max_tokens=1, temperature=0)
        k0 = len(s.pulses); st = 0
        while not c.output and st < 200:
            s.step(); st += 1
        print(f"bs={bs} admit_wait={aw}: steps {st} pulses {pulses(s, k0)}")
        s.shutdown()

if "arrivals" in which:
    # prompts that each fit the budget, arriving continuously, beside 2 long streams
    for chunk in (512,):
        s = DynamicScheduler(L, max_batch_size=8, buffer_size=32, prefill_chunk=chunk)
        a = s.new_task("User: hi\n\nAssistant:", max_tokens=100000, temperature=0)
        b = s.new_task("User: yo\n\nAssistant:", max_tokens=100000, temperature=0)
        for _ in range(8): s.step()
        rnd = random.Random(2)
        k0 = len(s.pulses); o0 = len(a.output) + len(b.output)
        t0 = time.perf_counter(); shorts = []
        for st in range(60):
            if st % 2 == 0:
                shorts.append(s.new_task(rnd.choices(range(1000, 60000), k=300), max_tokens=4, temperature=0))
            s.step()
        dt = time.perf_counter() - t0
        dec = len(a.output) + len(b.output) - o0
        ps = pulses(s, k0)
        print(f"arrivals: {dt:.2f}s pulses {len(ps)} mean {sum(ps)/len(ps):.1f} stream toks {dec} ({dec/dt:.0f}/s) shorts done {sum(t.is_finished for t in shorts)}/{len(shorts)}")
        print("   lens", ps[:40])
        s.shutdown()
