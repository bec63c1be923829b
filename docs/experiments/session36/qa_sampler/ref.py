"""Independent numpy reference of the documented sampling semantics."""
import numpy as np
import torch

GREEDY_BELOW = 1e-5


def ref_dist(logits, T, top_k, top_p, P=None):
    """Probability vector over V per API.md/sampler docstring."""
    l = np.asarray(logits, dtype=np.float64)
    if P is not None:
        l = l - np.asarray(P, dtype=np.float64)
    V = l.size
    if T < GREEDY_BELOW:
        p = np.zeros(V); p[int(np.argmax(l))] = 1.0
        return p
    x = l / T
    m = x.max()
    w = np.exp(x - m)
    order = np.argsort(-x, kind="stable")  # ties: lower index first (one choice)
    k = V if top_k <= 0 else min(top_k, V)
    keep = order[:k]
    mass_k = w[keep].sum()
    if top_p < 1:
        cum = np.cumsum(w[keep])
        before = np.concatenate([[0.0], cum[:-1]])
        n = max(1, int((before < top_p * mass_k).sum()))
        keep = keep[:n]
    p = np.zeros(V)
    p[keep] = w[keep]
    return p / p.sum()


def chi2_sf(stat, df):
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


def chi2_test(counts, p):
    """Pearson chi-square of counts vs p; tokens with p==0 must have count 0 (returned separately)."""
    counts = np.asarray(counts, dtype=np.float64)
    N = counts.sum()
    support = p > 0
    outside = counts[~support].sum()
    e = N * p[support]
    o = counts[support]
    # pool small expected cells
    small = e < 5
    if small.any():
        e = np.concatenate([e[~small], [e[small].sum()]])
        o = np.concatenate([o[~small], [o[small].sum()]])
    df = max(len(e) - 1, 1)
    stat = ((o - e) ** 2 / np.maximum(e, 1e-300)).sum()
    tv = 0.5 * np.abs(counts / N - p).sum()
    return stat, df, (chi2_sf(stat, df) if len(e) > 1 else 1.0), int(outside), tv


def ref_penalty_step(P, tok, presence, repetition, decay):
    P = P * np.float32(decay)
    if P[tok] == 0:
        P[tok] += np.float32(presence)
    else:
        P[tok] += np.float32(repetition)
    return P
