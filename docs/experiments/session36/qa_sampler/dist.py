import sys
sys.path.insert(0, "/tmp/qa_samp"); sys.path.insert(0, "/work/main")
import numpy as np, torch
from ref import ref_dist, chi2_test
from server.model.sampler import BatchSampler, SamplingBatch

torch.manual_seed(0)
V = 64
base = (torch.randn(V) * 2.0).float()


def draw(logits, T, k, p, N=20000, steps=1, seed0=12345):
    B = N // steps
    s = BatchSampler(V)
    b = SamplingBatch.empty(B, V)
    b.temperature.fill_(T); b.top_k.fill_(k); b.top_p.fill_(p)
    b.seed.copy_(torch.arange(B) * 7919 + seed0)
    L = logits[None, :].expand(B, V).contiguous()
    toks = []
    for _ in range(steps):
        toks.append(s.sample(L, b))
    t = torch.cat(toks).numpy()
    return np.bincount(t, minlength=V)


def check(name, logits, T, k, p, steps=1, N=20000):
    c = draw(logits, T, k, p, N=N, steps=steps)
    ref = ref_dist(logits.numpy(), T, k, p)
    stat, df, pv, outside, tv = chi2_test(c, ref)
    flag = "FAIL" if (pv < 1e-3 or outside) else "ok"
    print(f"{flag:4} {name:38} T={T} k={k} p={p} steps={steps} chi2={stat:.1f} df={df} "
          f"p={pv:.3g} outside={outside} TV={tv:.4f} support={int((ref>0).sum())}")
    return c, ref


if __name__ == "__main__":
    for T, k, p in [(1.0, 0, 1.0), (0.7, 0, 1.0), (1.0, 10, 1.0), (1.0, 0, 0.5), (0.8, 20, 0.9),
                    (1.3, 50, 0.3), (1.0, 1, 1.0), (1.0, 1, 0.9), (1.0, 1000, 1.0),
                    (1.0, 1000, 0.7), (1.0, 5000, 0.8), (1.0, -1, 0.6), (1.0, 64, 1.0),
                    (1.0, 65, 0.95), (1.0, 0, 1e-9), (1.0, 0, 0.0), (1.0, 5, 0.0),
                    (100.0, 0, 1.0), (1e6, 0, 1.0), (1e-4, 0, 1.0), (1e-5, 0, 1.0), (2e-5, 5, 0.9),
                    (0.05, 0, 1.0), (1.0, 3, 0.99)]:
        check("base", base, T, k, p)
    # across steps (counter advances) instead of rows
    check("base steps", base, 0.9, 30, 0.8, steps=10)
    check("base steps full", base, 1.0, 0, 1.0, steps=10)
