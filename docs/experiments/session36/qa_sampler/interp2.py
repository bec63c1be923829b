import sys
sys.path.insert(0, "/tmp/qa_samp"); sys.path.insert(0, "/work/main")
import numpy as np, torch
from server.model.kernels import sampling_triton as st
from server.model.sampler import BatchSampler, SamplingBatch

class Interpreted(BatchSampler):
    def _kernels(self, t):
        return st

def mk(params, V):
    b = SamplingBatch.empty(len(params), V)
    for i, (T, k, p, seed) in enumerate(params):
        b.temperature[i] = T; b.top_k[i] = k; b.top_p[i] = p; b.seed[i] = seed
    b.presence.fill_(0.4); b.repetition.fill_(0.2); b.decay.fill_(0.99)
    return b

V = 5000
g = torch.Generator().manual_seed(7)
ni = float("-inf")
cases = {}
l = torch.randn(V, generator=g) * 2; cases["random"] = l
l = torch.zeros(V); l[[4, 10, 20, 4000]] = 3.0; cases["ties4@top"] = l
cases["flat"] = torch.zeros(V)
l = torch.full((V,), ni); l[[7, 4999, 2500]] = torch.tensor([1.0, 0.5, 1.0]); cases["-inf mostly"] = l
l = torch.randn(V, generator=g); l[:2000] = ni; cases["-inf block"] = l
l = torch.zeros(V); l[100:200] = 5.0; cases["100 tied"] = l
params = [(1.0, 1, 1.0, 1), (1.0, 2, 1.0, 2), (0.8, 5, 0.5, 3), (1.0, 64, 0.9, 4), (1.0, 64, 1.0, 5),
          (0.0, 0, 1.0, 6), (1.0, 3, 0.0, 7), (1.3, 50, 0.95, 8)]
for name, l in [(n, c) for n, c in cases.items() if n == "100 tied"]:
    L = l[None].expand(len(params), V).contiguous()
    a, b = mk(params, V), mk(params, V)
    res = []
    for step in range(3):
        want = BatchSampler(V).sample(L, a)
        got = Interpreted(V).sample(L, b)
        res.append((want.tolist(), got.tolist()))
    same = all(w == g_ for w, g_ in res) and torch.equal(a.penalties, b.penalties)
    print(f"{name:12} torch==triton {same}")
    if not same:
        for w, g_ in res:
            print("   torch ", w, "\n   triton", g_)
