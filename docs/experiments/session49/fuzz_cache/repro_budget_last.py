"""A prompt resumed from a cached aligned prefix whose remaining feed fills the step's budget
exactly (all but its last token) ends that step one token short; its last token then goes
through a decode step, while without the cache it is fed with the prompt's pass (the first
token sampled from that pass). Compare replies and final states, cache off vs on."""
import sys
sys.path.insert(0, "/tmp/fz_cache/fuzz")
from common import *
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task

L = loader(); M = L.model
import random
rng = random.Random(5)
base = [rng.randrange(300, 20000) for _ in range(33)]
N = int(sys.argv[1]) if len(sys.argv) > 1 else 97
full = base[:32] + [rng.randrange(300, 20000) for _ in range(N - 32)]  # 97 tokens: s.end = 96
CHUNK = 64

def go(cache, seeded):
    sched = DynamicScheduler(L, max_batch_size=1, buffer_size=4, prefix_cache=cache, prefill_chunk=CHUNK)
    kw = dict(temperature=1.0, top_p=1.0, top_k=0, seed=7) if seeded else dict(temperature=0.0)
    t0 = Task(list(base), max_tokens=0); t0.cache_origin = ""   # a template: stores the state after 32
    sched.add_task(t0); sched.run()
    t = Task(list(full), max_tokens=12, **kw); t.cache_origin = ""
    sched.add_task(t); sched.run()
    return t

for seeded in (False, True):
    a = go(None, seeded)
    cache = PrefixCache(64 << 20)
    b = go(cache, seeded)
    st = cache.stats()
    print(f"seeded={seeded}: cache hits={st['hits']} saved={st['tokens_saved']}")
    print("  off:", a.output)
    print("  on: ", b.output)
    print("  same output:", a.output == b.output, " same final state bits:",
          torch.equal(a.state.wkv, b.state.wkv) and torch.equal(a.state.shift, b.state.shift),
          " max |diff| wkv:", (a.state.wkv - b.state.wkv).abs().max().item())
