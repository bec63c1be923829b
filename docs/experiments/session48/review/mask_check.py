"""Compare Guide.apply (new: byte table + index_add_ + host eos fallback) against the
pre-change semantics (reference, verbatim from 6738fa2 plus a plain-Python spec) on the CPU."""
import sys, numpy as np, torch
import server.scheduler.guide as G

def reference(words, live, rows, logits, eos):
    """6738fa2's code (words already with dead rows = -1)."""
    bits = torch.arange(32, dtype=torch.int32)
    w = torch.from_numpy(words.copy())
    allowed = ((w[:, :, None] >> bits) & 1).flatten(1)[:, :logits.shape[1]] != 0
    if allowed.shape[1] < logits.shape[1]:
        allowed = torch.nn.functional.pad(allowed, (0, logits.shape[1] - allowed.shape[1]))
    allowed[:, eos] |= ~allowed.any(dim=1)
    out = logits.clone()
    out[rows] = logits.index_select(0, rows).masked_fill(~allowed, float("-inf"))
    return out

def spec_row(wrow, V, eos):
    """Plain spec: t allowed iff t < min(V, 32W) and bit t%32 of word t//32; eos alone if none."""
    u = wrow.view(np.uint32)
    t = np.arange(V)
    ok = np.zeros(V, bool)
    m = t < 32 * len(u)
    ok[m] = (u[t[m] // 32] >> (t[m] % 32).astype(np.uint32)) & 1 != 0
    if not ok.any():
        ok[eos] = True
    return ok

class FakeC:
    def __init__(self, W): self.words = W
    def arm(self, n): return False

rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
Vs = sorted(set([1, 2, 31, 32, 33, 63, 64, 65, 100, 1000, 4095, 4096, 4097, 65535, 65536, 65537,
                 65529, 70000] + list(rng.integers(1, 70001, 40))))
n_cases = bad = 0
for V in Vs:
    for W in sorted({max(1, -(-V // 32)), max(1, V // 32), -(-V // 32) + 3, max(1, V // 64), 2048}):
        if W * 32 > 80000 and W != 2048: continue
        cap = int(rng.integers(1, 9)); S = int(rng.integers(1, cap + 1))
        slots = sorted(rng.choice(cap, S, replace=False).tolist())
        eos = int(rng.choice([0, 0, 0, min(31, min(V, 32 * W) - 1), min(V, 32 * W) - 1, int(rng.integers(0, min(V, 32 * W)))]))
        words = np.zeros((S, W), np.int32)
        for i in range(S):
            kind = rng.integers(0, 6)
            if kind == 0: pass                                    # nothing allowed
            elif kind == 1: words[i] = rng.integers(-2**31, 2**31, W, dtype=np.int64).astype(np.int32)
            elif kind == 2:                                       # a few bits anywhere
                for t in rng.integers(0, 32 * W, int(rng.integers(1, 4))):
                    words[i, t // 32] |= np.int32(np.uint32(1 << int(t % 32)).view(np.int32))
            elif kind == 3:                                       # bits only at/after V
                for t in range(V, min(32 * W, V + 40)):
                    words[i, t // 32] |= np.uint32(1 << (t % 32)).view(np.int32)
            elif kind == 4:                                       # bit 31s only (sign bit)
                words[i, rng.integers(0, W)] = np.int32(-2**31)
            else:                                                 # last token below V only
                t = min(V, 32 * W) - 1; words[i, t // 32] |= np.uint32(1 << (t % 32)).view(np.int32)
        live = rng.random(S) < 0.8
        logits = torch.from_numpy(rng.standard_normal((cap, V)).astype(np.float32) * 10)
        g = G.Guide({s: FakeC(W) for s in slots}, V, torch.device("cpu"), eos)
        g.live = list(live)
        prepared = words.copy()
        G.fill_masks = lambda rs, w: [w.__setitem__(i, prepared[i]) for _, i in rs]
        out = g.apply(logits)
        dead = words.copy(); dead[~live] = -1
        ref = reference(dead, live, g.rows, logits, eos)
        ok = torch.equal(out, ref) and not out.isnan().any()
        for j, s in enumerate(slots):
            allowed = spec_row(dead[j], V, eos)
            ok &= bool((torch.isfinite(out[s]).numpy() == allowed).all())
            ok &= bool(torch.equal(out[s][torch.from_numpy(allowed)], logits[s][torch.from_numpy(allowed)]))
        others = [r for r in range(cap) if r not in slots]
        ok &= torch.equal(out[others], logits[others])
        ok &= torch.equal(logits, torch.from_numpy(logits.numpy()))  # input untouched (clone)
        n_cases += 1
        if not ok:
            bad += 1; print("MISMATCH V", V, "W", W, "eos", eos, "live", live)
print(f"{n_cases} cases, {bad} mismatches")
