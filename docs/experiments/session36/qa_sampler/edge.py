import sys
sys.path.insert(0, "/tmp/qa_samp"); sys.path.insert(0, "/work/main")
import numpy as np, torch
from ref import ref_dist, chi2_test
from server.model.sampler import BatchSampler, SamplingBatch

def run(logits, T, k, p, B=4000, seed0=5, steps=1):
    V = logits.shape[-1]
    s = BatchSampler(V); b = SamplingBatch.empty(B, V)
    b.temperature.fill_(T); b.top_k.fill_(k); b.top_p.fill_(p)
    b.seed.copy_(torch.arange(B) * 31 + seed0)
    L = (logits if logits.dim() == 2 else logits[None].expand(B, V)).contiguous()
    out = [s.sample(L, b) for _ in range(steps)]
    return torch.cat(out).numpy()

def rep(name, logits, T, k, p, **kw):
    t = run(logits, T, k, p, **kw)
    c = np.bincount(t, minlength=logits.shape[-1])
    nz = {int(i): int(c[i]) for i in np.flatnonzero(c)}
    print(f"{name:40} T={T} k={k} p={p} -> {nz if len(nz) <= 12 else ('%d distinct' % len(nz))}")
    return c

ni = float("-inf")
V = 16
# all equal
rep("all equal full", torch.zeros(V), 1.0, 0, 1.0)
rep("all equal top_p .5 (8 of 16 expected)", torch.zeros(V), 1.0, 0, 0.5)
rep("all equal top_k 4", torch.zeros(V), 1.0, 4, 1.0)
rep("all equal top_k 4 top_p .5", torch.zeros(V), 1.0, 4, 0.5)
rep("all equal greedy", torch.zeros(V), 0.0, 0, 1.0)
rep("all equal top_k 1", torch.zeros(V), 1.0, 1, 1.0)
rep("all equal top_p 0", torch.zeros(V), 1.0, 0, 0.0)
# ties at top-p boundary: token weights 4: [2,1,1,1,1,...]
l = torch.full((V,), -30.0); l[3] = np.log(2); l[7] = 0; l[9] = 0; l[12] = 0
# masses: 2,1,1,1 of 5 -> top_p 0.6 needs 2+1 = 3/5 -> one of tokens 7/9/12 at boundary
rep("tie at boundary p=.6", l, 1.0, 0, 0.6)
rep("tie at boundary p=.6 k=3", l, 1.0, 3, 0.6)
rep("tie at boundary k=2", l, 1.0, 2, 1.0)
# -inf
l = torch.full((V,), ni); l[5] = 1.0; l[11] = 0.0
rep("-inf except 5,11 full", l, 1.0, 0, 1.0)
rep("-inf except 5,11 k=4", l, 1.0, 4, 1.0)
rep("-inf except 5,11 k=0 p=.99", l, 1.0, 0, 0.99)
rep("-inf except 5,11 k=5000>V p=.99", l, 1.0, 5000, 0.99)
rep("-inf except 5,11 greedy", l, 0.0, 0, 1.0)
l = torch.full((V,), ni); l[9] = 0.0
rep("-inf except 9 full", l, 1.0, 0, 1.0)
rep("-inf except 9 k=3", l, 1.0, 3, 1.0)
rep("-inf except 9 p=.5", l, 1.0, 0, 0.5)
rep("-inf except 9 T=1e-3", l, 1e-3, 0, 1.0)
l = torch.full((V,), ni)
for args in [(1.0, 0, 1.0), (1.0, 3, 1.0), (1.0, 0, 0.5), (0.0, 0, 1.0)]:
    rep("ALL -inf", l, *args, B=50)
# greedy ties: first index?
l = torch.zeros(V); l[4] = 3; l[10] = 3
for args in [(0.0, 0, 1.0), (0.0, 5, 0.3), (1e-6, 0, 1.0), (0.0, 1, 0.0)]:
    rep("greedy tie 4/10", l, *args, B=50)
rep("top_k=1 tie 4/10", l, 1.0, 1, 1.0)
rep("top_p=0 tie 4/10", l, 1.0, 0, 0.0)
rep("top_k=1 tie 4/10 V big", torch.cat([l, torch.zeros(2000)]), 1.0, 1, 1.0, B=200)
rep("top_p=0 tie 4/10 V big", torch.cat([l, torch.zeros(2000)]), 1.0, 0, 0.0, B=200)
# large logits
l = torch.randn(V) * 1e4
rep("logits*1e4 T=1", l, 1.0, 0, 1.0); print(" argmax", int(l.argmax()))
rep("logits*1e4 T=1e-5", l, 1e-5, 0, 1.0)
l = torch.randn(V) * 60000
rep("logits*6e4 T=1e-5 full", l, 1e-5, 0, 1.0); print(" argmax", int(l.argmax()))
rep("logits*6e4 T=1e-5 k5", l, 1e-5, 5, 0.9)
rep("logits*6e4 T=1e-5 p.9", l, 1e-5, 0, 0.9)
