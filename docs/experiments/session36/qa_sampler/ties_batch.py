import sys
sys.path.insert(0, "/tmp/qa_samp"); sys.path.insert(0, "/work/main")
import numpy as np, torch
from server.model.sampler import BatchSampler, SamplingBatch

def mk(params, V):
    b = SamplingBatch.empty(len(params), V)
    for i, (T, k, p, seed) in enumerate(params):
        b.temperature[i] = T; b.top_k[i] = k; b.top_p[i] = p; b.seed[i] = seed
    return b

for V in (16, 64, 65536):
    l = torch.zeros(V); l[4] = 3; l[10] = 3; l[20 % V] = 3
    s = BatchSampler(V)
    alone = {}
    rowA = (1.0, 1, 1.0, 7)
    for label, params in [("A alone", [rowA]), ("A + k=50 row", [rowA, (1.0, 50, 1.0, 8)]),
                          ("A + k=2 row", [rowA, (1.0, 2, 1.0, 8)]),
                          ("A + 7 rows k=1", [rowA] + [(1.0, 1, 1.0, 9)] * 7),
                          ("greedy alone", [(0.0, 0, 1.0, 7)])]:
        b = mk(params, V)
        L = l[None].expand(len(params), V).contiguous()
        toks = [int(s.sample(L, b)[0]) for _ in range(1)]
        print(V, label, toks)
    # top-k boundary with ties: row k=2, ties 4,10,20 at top -> which two?
    for label, params in [("k=2 alone", [(1.0, 2, 1.0, 7)]), ("k=2 + k=60 row", [(1.0, 2, 1.0, 7), (1.0, 60, 1.0, 8)])]:
        b = mk(params, V); L = l[None].expand(len(params), V).contiguous()
        seen = set()
        for _ in range(40):
            seen.add(int(s.sample(L, b)[0]))
        print(V, label, sorted(seen))
    # sorted group (top_p) with ties: row counts
    for n in (1, 3, 17):
        b = mk([(1.0, 0, 0.5, 7)] * n, V); L = l[None].expand(n, V).contiguous()
        seen = set()
        for _ in range(40):
            seen.add(int(s.sample(L, b)[0]))
        print(V, "top_p .5 rows", n, sorted(seen))
