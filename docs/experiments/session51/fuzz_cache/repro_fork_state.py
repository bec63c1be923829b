"""Seed 1016's chain, sequential (one task at a time): P -> fork F4 (+prompt) -> fork F13 (+prompt).
Cache on vs off, prefill_chunk CHUNK: F13's outputs equal, its final state's bits?"""
import sys; sys.path.insert(0, "/tmp/fz51_fuzz"); import fuzz as F
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task
from server.task.cache_origin import origin_of, state_digest
import torch
CHUNK = int(sys.argv[1]) if len(sys.argv) > 1 else 45
F.ROWWISE[0] = False  # one task at a time: batch 1 anyway
systems, ops = F.script(1016)
byid = {op[1]: op for op in ops}
L = F.L
def run(cached):
    s = DynamicScheduler(L, max_batch_size=16, buffer_size=2, prefill_chunk=CHUNK,
                         prefix_cache=PrefixCache(int(F.SB * 5)) if cached else None)
    _, _, sysi, ut, mt, d = byid["P3"]
    p = Task(L.encode(f"System: {systems[sysi]}\n\nUser: {ut}\n\nAssistant:"), max_tokens=mt, **d); p.cache_origin = ""
    s.add_task(p)
    while s.has_work: s.step()
    out = {"P3": p}; src = p
    for tid in ("F4", "F13"):
        _, _, _, ut, mt, d = byid[tid]
        f = src.fork(tid); f.cache_origin = origin_of(src)
        f.continue_gen(L.encode(ut), max_tokens=mt, **d); s.add_task(f)
        while s.has_work: s.step()
        out[tid] = f; src = f
    return out, s
a, sa = run(True); b, sb = run(False)
for tid in a:
    print(tid, "origin", repr(a[tid].cache_origin), "hist", len(a[tid].history), "output equal", a[tid].output == b[tid].output,
          "state equal", state_digest(a[tid].state) == state_digest(b[tid].state))
print("cache stats", {k: v for k, v in sa.prefix_cache.stats().items() if k in ("hits", "tokens_saved", "entries")})
