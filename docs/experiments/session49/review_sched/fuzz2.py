"""Differential fuzz with the prefix cache: shared prefixes (turn boundaries) across tasks
arriving at random steps, cache on, vs each task alone without a cache."""
import random, sys
from common import loader
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task
from fuzz1 import params, alone

from common import rowwise
L = loader(); rowwise(L.model)
V = 65536
import os
CAPS = [int(x) for x in os.environ.get("CAPS", "2,4,8").split(",")]
TURN = 261
HITS = []

def make(spec):
    toks, p, bias = spec
    t = Task(list(toks), **p)
    t.logit_bias = dict(bias) if bias else None
    t.cache_origin = ""
    return t

def one(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 10)
    chunk = rng.choice([32, 64, 512])
    buf = rng.choice([1, 2, 4, 8])
    bases = [[rng.randrange(300, V) for _ in range(rng.choice([20, 40, 64, 100]))] + [TURN] for _ in range(2)]
    specs, arrive = [], []
    for i in range(n):
        b = list(rng.choice(bases))
        if rng.random() < 0.5:
            b = b[:rng.randint(1, len(b))]
        toks = b + [rng.randrange(300, V) for _ in range(rng.choice([0, 1, 5, 33]))]
        if rng.random() < 0.3:
            toks += [TURN] + [rng.randrange(300, V) for _ in range(rng.choice([1, 5, 40]))]
        if not toks:
            toks = [5]
        specs.append((toks, params(rng), None))
        arrive.append(rng.randint(0, 12))
    # duplicates
    for i in range(n):
        if rng.random() < 0.2:
            specs[i] = (specs[rng.randrange(n)][0], specs[i][1], None)
    cache = PrefixCache(rng.choice([1 << 20, 1 << 24]), min_tokens=rng.choice([4, 16]))
    s = DynamicScheduler(L, max_batch_size=rng.choice(CAPS), buffer_size=buf,
                         prefill_chunk=chunk, prefix_cache=cache)
    tasks = [None] * n
    step = 0
    while True:
        for i in range(n):
            if arrive[i] == step and tasks[i] is None:
                tasks[i] = make(specs[i]); s.add_task(tasks[i])
        if all(t is not None for t in tasks) and not s.has_work:
            break
        if s._has_slot_work:
            s.step()
        else:
            s.engine.copyback.wait_idle(0.1)
        step += 1
        if step > 5000:
            print("seed", seed, "STUCK"); return False
    ok = True
    HITS.append(cache.stats()['hits'])
    for i, t in enumerate(tasks):
        t.wait(5)
        got = (t.output, t.finish_reason, list(t.history), t.current_token)
        exp = alone(specs[i], chunk, buf)
        if got[:2] != exp[:2] or got[2:] != exp[2:]:
            ok = False
            print(f"seed {seed} task {i} len={len(specs[i][0])} p={specs[i][1]} chunk={chunk} buf={buf}")
            print("  got", got[0], got[1], len(got[2]), got[3])
            print("  exp", exp[0], exp[1], len(exp[2]), exp[3])
    return ok

if __name__ == "__main__":
    a, b = int(sys.argv[1]), int(sys.argv[2])
    bad = [sd for sd in range(a, b) if not one(sd)]
    print("bad seeds", bad, "hits", sum(HITS))
