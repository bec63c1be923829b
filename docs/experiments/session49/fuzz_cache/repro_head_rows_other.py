"""Prompt A, new, arrives together with prompt B, which was seen before: without the cache A and
B go through one 2-row pass; with it B loads its whole-prompt entry (no pass) and A's pass is 1
row. A's first-token log probabilities, cache off vs on (A itself never touches the cache)."""
import sys, random
sys.path.insert(0, "/tmp/fz_cache/fuzz")
from common import *
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task
L = loader()
rng = random.Random(3)
pa = [rng.randrange(300, 20000) for _ in range(90)]
pb = [rng.randrange(20000, 40000) for _ in range(70)]
def mk(p):
    t = Task(list(p), max_tokens=2, temperature=1.0, top_p=1.0, top_k=0, seed=1); t.cache_origin = ""; t.logprobs = 3
    return t
def go(cache):
    sched = DynamicScheduler(L, max_batch_size=4, buffer_size=4, prefix_cache=cache)
    sched.add_task(mk(pb)); sched.run()           # B seen before
    a, b = mk(pa), mk(pb); sched.add_task(a); sched.add_task(b); sched.run()
    return a, sched
(a0, _), (a1, s1) = go(None), go(PrefixCache(64 << 20))
print("A first token logprob, cache off:", a0.output_logprobs[0])
print("A first token logprob, cache on: ", a1.output_logprobs[0])
print("equal:", a0.output_logprobs[0] == a1.output_logprobs[0], "| cache:", {k: s1.prefix_cache.stats()[k] for k in ("hits", "misses")})
