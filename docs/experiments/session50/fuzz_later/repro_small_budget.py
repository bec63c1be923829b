"""A step budget (prefill_chunk) smaller than align (32 on the CPU): feeds are cut off the
align grid ("progress before exactness", Prefiller._cut), yet the states the prefiller stores
are kept as if exact. Checks every cache entry against a lone prefill, and a lone request's
output/state with the cache vs without it."""
import sys, os
sys.path.insert(0, "/tmp/h1")
import torch
torch.set_num_threads(1)
from server.model.loader import RWKV070ModelLoader
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task

MODEL = "/tmp/h1/report/tiny.pth"
L = RWKV070ModelLoader(MODEL, device="cpu"); M = L.model
print("align", M.prefill_align, "split_invariant", M.split_invariant)
sysp = [300 + (i * 7) % 100 for i in range(90)]
p1 = sysp + [261] + [20000 + i for i in range(30)] + [261, 5585, 41]
p2 = sysp + [261] + [20050 + i for i in range(25)] + [261, 5585, 41]

def lone(tokens):
    st = M.new_state(1); M.prefill([list(tokens)], st, logits=False); return st

for chunk in (int(a) for a in (sys.argv[1:] or ["20", "31", "32"])):
    cache = PrefixCache(64 << 20)
    s = DynamicScheduler(L, max_batch_size=4, buffer_size=4, prefix_cache=cache, prefill_chunk=chunk)
    t = Task(list(p1), max_tokens=0); t.cache_origin = ""; s.add_task(t); s.run()
    bad = 0
    for e in cache._lru.values():
        w = lone(e.tokens)
        ok = torch.equal(w.wkv, e.state.wkv) and torch.equal(w.shift, e.state.shift)
        bad += not ok
        print(f"  chunk={chunk} entry n={len(e.tokens)} exact={ok} maxdiff={(w.wkv - e.state.wkv).abs().max().item():.3g}")
    # a second request sharing the system prompt, alone, cache vs plain (same chunk)
    outs = []
    for c in (cache, None):
        sc = s if c is not None else DynamicScheduler(L, max_batch_size=4, buffer_size=4, prefill_chunk=chunk)
        q = Task(list(p2), max_tokens=8, temperature=1.0, top_p=0.9, top_k=0, seed=3); q.cache_origin = ""
        sc.add_task(q); sc.run(); outs.append(q)
    same = outs[0].output == outs[1].output and torch.equal(outs[0].state.wkv, outs[1].state.wkv)
    print(f"chunk={chunk}: entries={len(cache._lru)} inexact={bad} hits={cache.hits} second request same with/without cache: {same}")
