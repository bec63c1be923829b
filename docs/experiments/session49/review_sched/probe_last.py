from common import loader
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task
L = loader()
def run(n, chunk, cache):
    s = DynamicScheduler(L, max_batch_size=1, buffer_size=4, prefill_chunk=chunk,
                         prefix_cache=PrefixCache(1 << 24) if cache else None)
    t = Task([300 + i for i in range(n)], max_tokens=8, temperature=1.0, top_p=1.0, top_k=0, seed=3)
    t.cache_origin = ""
    s.add_task(t); s.run(); return t.output
for n, chunk in [(33, 32), (65, 64), (65, 32), (40, 32)]:
    a, b = run(n, chunk, False), run(n, chunk, True)
    print(n, chunk, a == b, a, b)
