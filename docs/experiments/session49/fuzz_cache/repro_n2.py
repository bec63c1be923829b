"""n > 1 (two choices of one prompt, admitted together), max_batch_size 4, real (batched)
products: cache off vs on. Without the cache both prompts go through one 2-row pass (the head's
product over 2 rows); with it the leader feeds alone (1-row head) and the other loads its
whole-prompt entry (the leader's 1-row logits)."""
import sys, random
sys.path.insert(0, "/tmp/fz_cache/fuzz")
from common import *
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task
L = loader()
def go(cache, prompt, seeds, greedy):
    sched = DynamicScheduler(L, max_batch_size=4, buffer_size=4, prefix_cache=cache)
    ts = []
    for s in seeds:
        kw = dict(temperature=0.0) if greedy else dict(temperature=1.0, top_p=0.9, top_k=0, seed=s)
        t = Task(list(prompt), max_tokens=30, **kw); t.cache_origin = ""; ts.append(t); sched.add_task(t)
    sched.run()
    return ts
ndiff = nstate = 0
for k in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
    rng = random.Random(k)
    prompt = [rng.randrange(300, 20000) for _ in range(rng.randrange(40, 200))]
    greedy = k % 2 == 0
    a = go(None, prompt, [k, k + 1], greedy); b = go(PrefixCache(64 << 20), prompt, [k, k + 1], greedy)
    sd = [not (torch.equal(x.state.wkv, y.state.wkv)) for x, y in zip(a, b)]
    od = [x.output != y.output for x, y in zip(a, b)]
    nstate += any(sd); ndiff += any(od)
    print(f"prompt {k} len={len(prompt)} greedy={greedy}: output differs {od}, state bits differ {sd}")
    for x, y, d in zip(a, b, od):
        if d: print("   off", x.output, "\n   on ", y.output)
print("prompts with differing outputs:", ndiff, "differing states:", nstate)
