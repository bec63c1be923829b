"""Scan prompts for a reply that differs (cache off vs on) through the budget-exact last-token
decode (repro_budget_last.py's case)."""
import sys, random
sys.path.insert(0, "/tmp/fz_cache/fuzz")
from common import *
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task
L = loader()
def go(cache, base, full, kw):
    sched = DynamicScheduler(L, max_batch_size=1, buffer_size=4, prefix_cache=cache, prefill_chunk=64)
    t0 = Task(list(base), max_tokens=0); t0.cache_origin = ""; sched.add_task(t0); sched.run()
    t = Task(list(full), max_tokens=40, **kw); t.cache_origin = ""; sched.add_task(t); sched.run()
    return t.output, sched.prefiller.prefilled_tokens
N = int(sys.argv[1]) if len(sys.argv) > 1 else 97
for seed in range(40):
    rng = random.Random(seed)
    base = [rng.randrange(300, 20000) for _ in range(33)]
    full = base[:32] + [rng.randrange(300, 20000) for _ in range(N - 32)]
    kw = dict(temperature=1.0, top_p=0.9, top_k=0, seed=seed) if seed % 2 else dict(temperature=0.0)
    (a, pa), (b, pb) = go(None, base, full, kw), go(PrefixCache(64 << 20), base, full, kw)
    if a != b:
        print(f"seed {seed} {kw}: prefilled off={pa} on={pb}\n  off {a}\n  on  {b}"); break
else:
    print("no output difference in 40 prompts")
