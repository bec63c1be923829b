import sys
sys.path.insert(0, "/tmp/qa_samp"); sys.path.insert(0, "/work/main")
import numpy as np, torch
from server.model.sampler import BatchSampler, SamplingBatch
M = (1 << 64) - 1

def sm64(seed, counter):
    z = (seed + (counter + 1) * 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)

def u_of(seed, counter):
    return (sm64(seed & M, counter) >> 11) * 2.0 ** -53

def ref_token(l, P, T, k, p, u):
    x = l.astype(np.float64) - P.astype(np.float64)
    V = x.size
    if T < 1e-5:
        return int(np.argmax(x))
    x = x / T
    w = np.exp(x - x.max())
    kk = V if k <= 0 else min(k, V)
    if kk == V and p >= 1:
        order = np.arange(V)  # documented: vocabulary order
    else:
        order = np.argsort(-x, kind="stable")[:kk]
        if p < 1:
            cum = np.cumsum(w[order]); before = np.concatenate([[0], cum[:-1]])
            n = max(1, int((before < np.float32(p) * cum[-1]).sum()))
            order = order[:n]
    cw = np.cumsum(w[order])
    i = int(np.searchsorted(cw, u * cw[-1], side="right"))
    return int(order[min(i, len(order) - 1)])

rng = np.random.default_rng(0)
V, steps = 50, 40
rows = [  # T, k, p, presence, repetition, decay, seed
    (1.0, 0, 1.0, 0.0, 0.0, 1.0, 1),
    (0.8, 10, 0.9, 0.5, 0.2, 0.996, 2),
    (1.2, 0, 0.7, 2.0, 0.0, 1.0, 3),
    (0.0, 0, 1.0, 1.5, 0.7, 0.9, 4),
    (1.0, 5, 1.0, 0.0, 1.0, 0.5, 5),    # presence 0, repetition 1: note spec semantics
    (1.0, 0, 1.0, 0.3, 0.3, 0.0, 6),    # decay 0
    (0.5, 2000, 0.95, -1.0, 0.5, 0.99, -7),  # negative presence, negative seed
    (1.0, 1, 1.0, 1.0, 1.0, 1.0, 2**63 + 5),
    (2.0, 0, 1.0, 0.7, 0.1, 0.8, 2**64 - 1),
]
B = len(rows)
s = BatchSampler(V); b = SamplingBatch.empty(B, V)
from server.model.sampler import wrap_seed
for i, (T, k, p, pr, rp, d, sd) in enumerate(rows):
    b.temperature[i] = T; b.top_k[i] = k; b.top_p[i] = p; b.presence[i] = pr
    b.repetition[i] = rp; b.decay[i] = d; b.seed[i] = wrap_seed(sd)
Pref = np.zeros((B, V), np.float32)
mism_tok = mism_P = 0
for step in range(steps):
    L = rng.normal(size=(B, V)).astype(np.float32) * 1.5
    tok = s.sample(torch.from_numpy(L), b).numpy()
    for i, (T, k, p, pr, rp, d, sd) in enumerate(rows):
        want = ref_token(L[i], Pref[i], T, k, p, u_of(sd, step))
        if want != tok[i]:
            mism_tok += 1; print("TOKEN MISMATCH step", step, "row", i, "want", want, "got", tok[i])
        t = int(tok[i])
        Pref[i] = (Pref[i] * np.float32(d)).astype(np.float32)
        Pref[i, t] = np.float32(Pref[i, t] + np.float32(pr if Pref[i, t] == 0 else rp))
    diff = np.abs(Pref - b.penalties.numpy()).max()
    if diff != 0:
        mism_P += 1; print("P MISMATCH step", step, diff)
print("token mismatches", mism_tok, "P mismatches", mism_P, "counter", b.counter.tolist())
print("row4 (presence 0, repetition 1) P max:", float(b.penalties[4].abs().max()))
