"""Differential fuzz: each task's output in a busy scheduler (random arrivals, capacity growing
and shrinking) vs the same task run alone."""
import random, sys
from common import loader
from server.scheduler import DynamicScheduler
from server.scheduler.simple import SimpleScheduler
from server.task.task import Task

from common import rowwise
L = loader(); rowwise(L.model)
V = 65536
import os
CAPS = [int(x) for x in os.environ.get("CAPS", "2,4,8").split(",")]

def params(rng):
    p = dict(max_tokens=rng.choice([0, 1, 2, 3, 5, 8, 13, 30]),
             temperature=rng.choice([0.0, 0.3, 1.0, 1.5]),
             top_p=rng.choice([0.1, 0.5, 1.0]), top_k=rng.choice([0, 1, 5, 50]),
             presence_penalty=rng.choice([0.0, 0.5, 2.0]),
             repetition_penalty=rng.choice([0.0, 0.3]),
             penalty_decay=rng.choice([0.0, 0.9, 0.996, 1.0]),
             min_p=rng.choice([0.0, 0.0, 0.05]), seed=rng.randrange(1 << 40))
    return p

def make(rng, spec):
    toks, p, bias = spec
    t = Task(list(toks), **p)
    t.logit_bias = dict(bias) if bias else None
    return t

def alone(spec, chunk, buf):
    s = DynamicScheduler(L, max_batch_size=1, buffer_size=buf, prefill_chunk=chunk)
    t = make(None, spec); s.add_task(t); s.run()
    return t.output, t.finish_reason, list(t.history), t.current_token

def one(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 10)
    chunk = rng.choice([32, 64, 512])
    buf = rng.choice([1, 2, 4, 8])
    specs, arrive = [], []
    for i in range(n):
        ln = rng.choice([1, 2, 5, 31, 33, 64, 70, 150])
        toks = [rng.randrange(1, V) for _ in range(ln)]
        bias = None
        if rng.random() < 0.3:
            bias = {rng.randrange(V): rng.choice([-100.0, 5.0, 100.0]) for _ in range(rng.randint(1, 3))}
            if rng.random() < 0.3:
                bias[0] = rng.choice([3.0, 8.0])  # EOS sometimes
        specs.append((toks, params(rng), bias))
        arrive.append(rng.randint(0, 12))
    cls = SimpleScheduler if os.environ.get("SCHED") == "simple" else DynamicScheduler
    s = cls(L, max_batch_size=rng.choice(CAPS), buffer_size=buf, prefill_chunk=chunk)
    s.admit_wait = rng.choice([0, 1, 4]); s.ramp_gap = rng.choice([0, 0, 3])
    scores = []
    tasks = [None] * n
    step = 0
    while True:
        for i in range(n):
            if arrive[i] == step and tasks[i] is None:
                tasks[i] = make(rng, specs[i]); s.add_task(tasks[i])
        if all(t is not None for t in tasks) and not s.has_work:
            break
        if rng.random() < 0.2:
            toks_sc = [rng.randrange(1, V) for _ in range(rng.choice([1, 2, 40, 100]))]
            scores.append((toks_sc, s.score(toks_sc, rng.choice([0, 3]))))
        if s._has_slot_work:
            s.step()
        else:
            s.engine.copyback.wait_idle(0.1)
        step += 1
        if step > 5000:
            print("seed", seed, "STUCK"); return False
    s.engine.copyback.wait_idle(5)
    ok = True
    for toks_sc, fut in scores:
        ents = fut.result(10)
        if len(ents) != len(toks_sc) - 1:
            ok = False; print("seed", seed, "score entries", len(ents), "for", len(toks_sc), "tokens")
    for i, t in enumerate(tasks):
        t.wait(5)
        got = (t.output, t.finish_reason, list(t.history), t.current_token)
        exp = alone(specs[i], chunk, buf)
        if got != exp:
            ok = False
            print(f"seed {seed} task {i} len={len(specs[i][0])} p={specs[i][1]} bias={specs[i][2]} chunk={chunk} buf={buf}")
            print("  got", got[0], got[1], len(got[2]), got[3])
            print("  exp", exp[0], exp[1], len(exp[2]), exp[3])
    return ok

if __name__ == "__main__":
    a, b = int(sys.argv[1]), int(sys.argv[2])
    bad = [sd for sd in range(a, b) if not one(sd)]
    print("bad seeds", bad)
