"""Differential fuzz: templates (max_tokens=0), forks and continues with the prefix cache, as
the Task API makes them (``_fork``: origin kept), in a busy scheduler; each reply vs a fresh
task of the whole sequence without a cache."""
import random, sys
from common import loader, rowwise
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task, Status
from server.task.cache_origin import origin_of
from fuzz1 import params

L = loader(); rowwise(L.model)
V = 65536; TURN = 261

def fork(src, tid):
    origin = origin_of(src)
    t = src.fork(tid); t.cache_origin = origin
    return t

def ref(seq, p, chunk, buf):
    s = DynamicScheduler(L, max_batch_size=1, buffer_size=buf, prefill_chunk=chunk)
    t = Task(list(seq), **p); s.add_task(t); s.run()
    return t.output, t.finish_reason

def drive(s, until, limit=3000):
    n = 0
    while not until():
        if s._has_slot_work:
            s.step()
        else:
            s.engine.copyback.wait_idle(0.05)
        n += 1
        assert n < limit, "stuck"

def one(seed):
    rng = random.Random(seed)
    chunk = rng.choice([32, 64, 512]); buf = rng.choice([1, 2, 4, 8])
    cache = PrefixCache(1 << 24, min_tokens=rng.choice([4, 16]))
    s = DynamicScheduler(L, max_batch_size=rng.choice([2, 4, 8]), buffer_size=buf,
                         prefill_chunk=chunk, prefix_cache=cache)
    prefix = [rng.randrange(300, V) for _ in range(rng.choice([16, 31, 32, 33, 64, 65, 100]))]
    if rng.random() < 0.5:
        prefix[rng.randrange(len(prefix))] = TURN
    tpl = Task(list(prefix), max_tokens=0, task_id=rng.choice(["TMP", "_tpl"]))
    tpl.cache_origin = ""
    s.add_task(tpl)
    drive(s, lambda: tpl.is_finished and not tpl.held)
    flows = []
    for i in range(rng.randint(1, 5)):
        f = fork(tpl, f"F{i}")
        p = params(rng); p["max_tokens"] = rng.choice([1, 3, 8, 20]); p.pop("seed")
        seed_i = rng.randrange(1 << 30)
        extra = [rng.randrange(300, V) for _ in range(rng.choice([1, 2, 20, 40]))]
        f.continue_gen(extra, seed=seed_i, **p)
        flows.append((f, prefix + extra, {**p, "seed": seed_i}))
    for f, _, _ in flows:
        s.add_task(f)
    drive(s, lambda: all(f.is_finished and not f.held for f, _, _ in flows))
    ok = True
    for f, seq, p in flows:
        exp = ref(seq, p, chunk, buf)
        if (f.output, f.finish_reason) != exp:
            ok = False
            print(f"seed {seed} tpl={tpl.task_id} prefix={len(prefix)} seq={len(seq)} p={p} chunk={chunk} buf={buf} hits={cache.stats()['hits']}")
            print("  got", f.output, f.finish_reason); print("  exp", exp)
    # second round: continue each flow with more tokens, compare with the whole sequence
    for f, seq, p in flows:
        if f.finish_reason != "length":
            continue
        more = [rng.randrange(300, V) for _ in range(rng.choice([1, 5, 40]))]
        full = seq + f.output + more
        p2 = dict(p); p2["max_tokens"] = rng.choice([2, 6])
        f.continue_gen(more, **{**p2, "seed": p["seed"] + 1})
        s.add_task(f)
        drive(s, lambda: f.is_finished and not f.held)
        # a fresh task's penalties start at zero; the continued one's carry over, so compare
        # only with penalties off
        if p["presence_penalty"] == 0 and p["repetition_penalty"] == 0:
            exp = ref(full, {**p2, "seed": p["seed"] + 1}, chunk, buf)
            if (f.output, f.finish_reason) != exp:
                ok = False
                print(f"seed {seed} round2 seq={len(full)} p={p2}")
                print("  got", f.output, f.finish_reason); print("  exp", exp)
    return ok

if __name__ == "__main__":
    a, b = int(sys.argv[1]), int(sys.argv[2])
    bad = [sd for sd in range(a, b) if not one(sd)]
    print("bad seeds", bad)
