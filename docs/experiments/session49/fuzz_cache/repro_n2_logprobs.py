"""Two choices of one prompt admitted together (OpenAI n=2), max_batch_size 4, real products:
the first token's log probabilities, cache off vs on. Off: both rows' first logits come from one
2-row pass (head product over 2 rows). On: one leader feeds alone (1-row head) and the other
loads its whole-prompt entry (the leader's logits)."""
import sys, random
sys.path.insert(0, "/tmp/fz_cache/fuzz")
from common import *
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task
L = loader()
def go(cache, prompt, n):
    sched = DynamicScheduler(L, max_batch_size=4, buffer_size=4, prefix_cache=cache)
    ts = []
    for s in range(n):
        t = Task(list(prompt), max_tokens=3, temperature=1.0, top_p=1.0, top_k=0, seed=s)
        t.cache_origin = ""; t.logprobs = 5; ts.append(t); sched.add_task(t)
    sched.run()
    return ts, sched
rng = random.Random(0)
prompt = [rng.randrange(300, 20000) for _ in range(100)]
for n in (1, 2):
    (a, _), (b, sb) = go(None, prompt, n), go(PrefixCache(64 << 20), prompt, n)
    for i, (x, y) in enumerate(zip(a, b)):
        print(f"n={n} choice {i}: first token off/on {x.output[0]}/{y.output[0]}; its logprob off={x.output_logprobs[0]!r:.120}\n"
              f"{'':24}on ={y.output_logprobs[0]!r:.120}  equal={x.output_logprobs[0] == y.output_logprobs[0]}")
    print("   cache stats:", {k: sb.prefix_cache.stats()[k] for k in ("hits", "misses", "inserts")})
