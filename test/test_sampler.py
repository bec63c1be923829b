"""BatchSampler / SamplingBatch: filtering, distribution, penalties, seeded streams (CPU)."""
import pytest
import torch

from server.model.sampler import (TOPK_CAP, BatchSampler, SamplingBatch, splitmix64, uniform,
                                  wrap_seed)

_M64 = (1 << 64) - 1


def _ref_splitmix64(seed: int, n: int) -> int:
    """Unsigned textbook SplitMix64: n-th (0-based) output for `seed`."""
    z = (seed + (n + 1) * 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _rows(batch: int, vocab: int, **params) -> SamplingBatch:
    """`batch` rows; each keyword is a scalar (same for all rows) or a list (one per row)."""
    sb = SamplingBatch.empty(batch, vocab)
    for name, value in params.items():
        t = getattr(sb, name)
        t.copy_(torch.as_tensor(value, dtype=t.dtype).expand_as(t))
    return sb


def _expected_probs(logits, pen, temp, top_k, top_p, min_p=0.0) -> torch.Tensor:
    """Plain float64 reference of the filtered, renormalised distribution of one row: min-p
    (tokens less likely than min_p times the most likely one dropped), then top-k, then top-p
    over what remains."""
    p = torch.softmax((logits.double() - pen.double()) / temp, dim=0)
    p = torch.where(p >= min_p * p.max(), p, 0.0)
    p = p / p.sum()
    order = torch.argsort(p, descending=True)
    keep = torch.zeros_like(p, dtype=torch.bool)
    mass, total_k = 0.0, p[order[:top_k if top_k > 0 else len(p)]].sum().item()
    for rank, i in enumerate(order.tolist()):
        if (top_k > 0 and rank >= top_k) or (rank > 0 and mass >= top_p * total_k):
            break
        keep[i] = True
        mass += p[i].item()
    q = torch.where(keep, p, 0.0)
    return q / q.sum()


def test_splitmix64_matches_reference_and_known_vectors():
    seeds = [0, 1, -1, 1234567, 2**62 + 12345, -(2**63), 2**63 - 1]
    counters = [0, 1, 2, 7, 1000, 2**40]
    s = torch.tensor([x for x in seeds for _ in counters])
    c = torch.tensor(counters * len(seeds))
    got = [v & _M64 for v in splitmix64(s, c).tolist()]
    assert got == [_ref_splitmix64(x & _M64, n) for x in seeds for n in counters]
    # published SplitMix64 outputs for seed 1234567
    ref = [6457827717110365317, 3203168211198807973, 9817491932198370423]
    assert [v & _M64 for v in splitmix64(torch.full((3,), 1234567), torch.arange(3)).tolist()] == ref
    u = uniform(s, c)
    assert u.dtype == torch.float64 and bool((u >= 0).all()) and bool((u < 1).all())


def test_greedy_picks_argmax_of_penalised_logits():
    torch.manual_seed(0)
    logits = torch.randn(4, 50)
    sb = _rows(4, 50, temperature=0.0, top_k=[0, 3, 0, 0], top_p=[1.0, 0.5, 1.0, 1.0])
    sb.penalties[2, logits[2].argmax()] = 100.0  # row 2's best token is penalised away
    want = (logits - sb.penalties).argmax(1)
    got = BatchSampler(50).sample(logits, sb)
    assert got.tolist() == want.tolist()
    assert got[2] != logits[2].argmax()
    assert sb.counter.tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("top_k", [0, 50, 2000])
def test_tiny_positive_temperatures_are_greedy(top_k):
    """A temperature in (0, GREEDY_BELOW) is greedy: dividing by one below ~1e-37 overflowed
    the logits to inf, and the draw read NaN weights (a token at the vocabulary's end, or
    garbage; session 23's QA: temperature 1e-40 over HTTP)."""
    torch.manual_seed(0)
    V = 3000
    logits = torch.randn(5, V) * 8
    sb = _rows(5, V, temperature=[1e-40, 1e-38, 1e-30, 1e-6, 0.0], top_k=top_k, top_p=0.9,
               seed=list(range(5)))
    got = BatchSampler(V).sample(logits, sb)
    assert got.tolist() == logits.argmax(1).tolist()


@pytest.mark.parametrize("top_k,top_p,min_p", [
    (3, 1.0, 0.0), (0, 0.6, 0.0), (5, 0.7, 0.0), (1, 1.0, 0.0), (0, 0.0, 0.0), (4, 0.0, 0.0),
    (0, 1.0, 0.2), (8, 1.0, 0.25), (0, 0.9, 0.05), (2000, 1.0, 0.3), (3, 1.0, 1.0)])
def test_filtering_never_emits_excluded_tokens(top_k, top_p, min_p):
    torch.manual_seed(1)
    V, N = 12, 2000
    logits = torch.randn(V) * 2
    allowed = _expected_probs(logits, torch.zeros(V), 1.0, top_k, top_p, min_p) > 0
    if min_p:  # (the case filters something top-k and top-p alone keep)
        assert not (allowed == (_expected_probs(logits, torch.zeros(V), 1.0, top_k, top_p)
                                > 0)).all()
    sb = _rows(N, V, top_k=top_k, top_p=top_p, min_p=min_p, seed=list(range(N)))
    got = BatchSampler(V).sample(logits.expand(N, V).clone(), sb)
    assert bool(allowed[got].all())
    assert set(got.tolist()) == set(allowed.nonzero().squeeze(1).tolist())  # all kept ones occur
    for _ in range(20):  # and along one row's stream, counters advancing
        assert bool(allowed[BatchSampler(V).sample(logits.expand(N, V).clone(), sb)].all())


def test_top_p_stops_at_the_first_token_whose_mass_reaches_it():
    """The nucleus is the smallest prefix whose mass reaches top_p: with two tied tokens of
    0.5 each and top_p 0.5 the first alone is kept (ties: the lower id first). A cut at "mass
    before <= top_p" kept both, and no other test failed (session 41's mutation review)."""
    N = 400
    sb = _rows(N, 2, top_p=0.5, seed=list(range(N)))
    got = BatchSampler(2).sample(torch.zeros(N, 2), sb)
    assert got.tolist() == [0] * N
    sb = _rows(N, 2, top_p=0.5 + 1e-6, seed=list(range(N)))  # just past it: both, evenly
    got = BatchSampler(2).sample(torch.zeros(N, 2), sb)
    assert 150 < int(got.sum()) < 250


@pytest.mark.parametrize("temp,top_k,top_p,min_p", [
    (1.0, 0, 1.0, 0.0), (0.7, 0, 1.0, 0.0), (1.5, 5, 1.0, 0.0), (1.0, 0, 0.8, 0.0),
    (0.8, 6, 0.9, 0.0), (1.0, 2000, 0.85, 0.0),
    (1.0, 0, 1.0, 0.15), (1.5, 5, 1.0, 0.3), (0.8, 0, 0.9, 0.1), (1.0, 2000, 1.0, 0.2)])
def test_frequencies_match_renormalised_distribution(temp, top_k, top_p, min_p):
    torch.manual_seed(2)
    V, N = 10, 40000
    logits, pen = torch.randn(V), torch.rand(V)
    q = _expected_probs(logits, pen, temp, top_k, top_p, min_p)
    sb = _rows(N, V, temperature=temp, top_k=top_k, top_p=top_p, min_p=min_p,
               seed=torch.arange(N) * 7 + 3)
    sb.penalties.copy_(pen.expand(N, V))
    got = BatchSampler(V).sample(logits.expand(N, V).clone(), sb)
    counts = torch.bincount(got, minlength=V).double()
    assert bool((counts[q == 0] == 0).all())
    kept = q > 0
    expect = q[kept] * N
    chi2 = ((counts[kept] - expect) ** 2 / expect).sum().item()
    assert chi2 < 30.0, (chi2, counts.tolist(), expect.tolist())  # df <= 9: p ~ 5e-4


def test_penalties_follow_spec_exactly():
    V = 6
    logits = torch.tensor([[5.0, 4.0, 3.0, 0.0, 0.0, 0.0]])
    sb = _rows(1, V, temperature=0.0, presence=2.0, repetition=0.25, decay=0.5)
    sb.penalties[0, 3] = 1.0
    sampler = BatchSampler(V)
    assert sampler.sample(logits, sb).item() == 0        # first occurrence: presence
    assert sb.penalties[0].tolist() == [2.0, 0.0, 0.0, 0.5, 0.0, 0.0]
    assert sampler.sample(logits, sb).item() == 1        # 5 - 2 < 4
    assert sb.penalties[0].tolist() == [1.0, 2.0, 0.0, 0.25, 0.0, 0.0]
    assert sampler.sample(logits, sb).item() == 0        # 5 - 1 = 4 > 4 - 2: repetition now
    assert sb.penalties[0].tolist() == [0.5 + 0.25, 1.0, 0.0, 0.125, 0.0, 0.0]
    sb.decay.fill_(0.0)                                  # decayed to 0 -> presence again
    assert sampler.sample(logits, sb).item() == 0
    assert sb.penalties[0].tolist() == [2.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert sb.counter.item() == 4


_LAYOUT_CASES = [dict(top_k=0, top_p=1.0), dict(top_k=0, top_p=0.9), dict(top_k=20, top_p=0.95),
                 dict(top_k=TOPK_CAP + 500, top_p=1.0)]


@pytest.mark.parametrize("params", _LAYOUT_CASES)
def test_same_seed_same_tokens_whatever_the_slot(params):
    V, steps, slot = 2048, 50, 5
    target = dict(temperature=1.2, presence=0.5, repetition=0.3, decay=0.9, seed=-987654321, **params)
    alone = _rows(1, V, **target)
    crowd = _rows(8, V, temperature=[0.0, 1.0, 0.5, 1.0, 2.0, 1.0, 0.9, 1.0],
                  top_k=[0, 5, 0, 700, 0, 0, 40, 0], top_p=[1.0, 0.5, 0.3, 1.0, 1.0, 1.0, 0.8, 0.95],
                  seed=list(range(100, 108)))
    crowd.assign([slot], alone)
    sampler, gen = BatchSampler(V), torch.Generator().manual_seed(3)
    seq_alone, seq_crowd = [], []
    for _ in range(steps):
        logits = torch.randn(8, V, generator=gen) * 3
        seq_alone.append(sampler.sample(logits[slot:slot + 1].clone(), alone).item())
        seq_crowd.append(sampler.sample(logits, crowd)[slot].item())
    assert seq_alone == seq_crowd
    assert torch.equal(alone.penalties[0], crowd.penalties[slot])
    assert len(set(seq_alone)) > 10  # really random, not stuck


def test_different_seeds_differ_and_same_seed_repeats():
    V = 256
    logits = torch.randn(1, V, generator=torch.Generator().manual_seed(4)).expand(3, V).clone()
    sb = _rows(3, V, seed=[1, 2, 1])
    seqs = torch.stack([BatchSampler(V).sample(logits, sb) for _ in range(50)], dim=1)
    assert seqs[0].tolist() == seqs[2].tolist()
    assert (seqs[0] != seqs[1]).sum() > 40


def test_mixed_rows_in_one_batch_match_each_row_alone():
    V = 2048
    logits = torch.randn(7, V, generator=torch.Generator().manual_seed(5)) * 2
    sb = _rows(7, V, temperature=[0.0, 1.0, 1.0, 1.0, 0.7, 1.3, 1.0],
               top_k=[50, 1, 0, 0, 30, 0, 1500], top_p=[0.5, 1.0, 0.0, 1.0, 0.9, 0.7, 1.0],
               seed=[11, 12, 13, 14, 15, 16, 17])
    solo = [sb.select([i]) for i in range(7)]
    got = BatchSampler(V).sample(logits, sb)
    best = logits.argmax(1)
    assert got[:3].tolist() == best[:3].tolist()  # greedy, top_k=1, top_p=0
    for i in range(7):
        assert BatchSampler(V).sample(logits[i:i + 1].clone(), solo[i]).item() == got[i].item()
    assert sb.counter.tolist() == [1] * 7


def test_select_and_assign_rows():
    sb = _rows(4, 8, temperature=[0.1, 0.2, 0.3, 0.4], top_k=[1, 2, 3, 4], seed=[-1, 2, 3, 2**40])
    sb.penalties[2, 5] = 7.0
    part = sb.select(torch.tensor([2, 0]))
    assert part.batch_size == 2 and part.top_k.tolist() == [3, 1] and part.penalties[0, 5] == 7.0
    part.penalties[0, 5] = 1.0  # a copy
    assert sb.penalties[2, 5] == 7.0
    dst = SamplingBatch.empty(3, 8)
    dst.assign([1, 2], sb.select([3, 2]))
    assert dst.seed.tolist() == [0, 2**40, 3] and dst.penalties[2, 5] == 7.0
    assert dst.temperature.dtype == torch.float32 and dst.top_k.dtype == torch.int32
    assert wrap_seed(2**64 + 5) == 5 and wrap_seed(2**64 - 1) == -1 and wrap_seed(-3) == -3


def test_parameter_changes_after_sampling_take_effect():
    V = 64
    logits = torch.randn(2, V, generator=torch.Generator().manual_seed(7))
    sb, sampler = _rows(2, V, seed=[1, 2]), BatchSampler(V)
    sampler.sample(logits, sb)
    sb.assign([1], _rows(1, V, temperature=0.0))             # assign() resets the plan
    assert sampler.sample(logits, sb)[1] == logits[1].argmax()
    sb.top_k.fill_(1)
    sb.invalidate()                                          # direct writes need invalidate()
    assert sampler.sample(logits, sb).tolist() == logits.argmax(1).tolist()


def test_inactive_rows_keep_penalties_and_counter():
    V = 300
    gen = torch.Generator().manual_seed(8)
    sb = _rows(4, V, top_p=[1.0, 0.9, 1.0, 1.0], top_k=[0, 0, 30, 0], presence=1.0,
               repetition=0.5, decay=0.8, seed=[5, 6, 7, 8])
    alone = [sb.select([i]) for i in range(4)]
    sampler, active = BatchSampler(V), torch.tensor([True, False, True, False])
    with torch.inference_mode():  # as the engine calls it
        for _ in range(10):
            logits = torch.randn(4, V, generator=gen)
            got = sampler.sample(logits, sb, active=active)
            for i in (0, 2):
                assert sampler.sample(logits[i:i + 1].clone(), alone[i]).item() == got[i].item()
    assert sb.counter.tolist() == [10, 0, 10, 0]
    assert torch.equal(sb.penalties[[1, 3]], torch.zeros(2, V))
    assert torch.equal(sb.penalties[0], alone[0].penalties[0]) and sb.penalties[0].sum() > 0


@pytest.mark.gpu
def test_cuda_matches_cpu_and_never_syncs_once_planned():
    V = 4096
    logits = torch.randn(6, V, generator=torch.Generator().manual_seed(6)) * 2
    params = dict(temperature=[0.0, 1.0, 0.8, 1.0, 1.0, 1.0], top_k=[0, 0, 40, 0, 2000, 0],
                  top_p=[1.0, 1.0, 0.9, 0.8, 1.0, 0.0], seed=[1, 2, 3, 4, 5, 6], presence=0.4,
                  min_p=[0.5, 0.0, 0.05, 0.02, 0.1, 0.0])
    cpu, gpu = _rows(6, V, **params), _rows(6, V, **params).to("cuda")
    want = [BatchSampler(V).sample(logits, cpu).tolist() for _ in range(20)]
    sampler, logits_gpu = BatchSampler(V, "cuda"), logits.cuda()
    active = torch.ones(6, dtype=torch.bool, device="cuda")
    got = [sampler.sample(logits_gpu, gpu, active=active)]  # builds the plan: one sync
    torch.cuda.set_sync_debug_mode("error")
    try:
        got += [sampler.sample(logits_gpu, gpu, active=active) for _ in range(19)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.stack(got).tolist() == want


_PREPARE = """
import torch
from server.model.kernels import sampling_triton as st
g = torch.Generator().manual_seed(0)
B, V = 5, 10000
logits = torch.randn(B, V, generator=g) * 3
P = torch.randn(B, V, generator=g).clamp(min=0)
temp = torch.tensor([1.0, 0.7, 1.3, 0.3, 1.0])
for t in (None, temp):
    P1 = P.clone()
    x1 = st.prepare(logits, P1, t)
    x2 = logits - P
    if t is not None:
        x2 = x2 / t[:, None]
    assert torch.equal(x1, x2) and torch.equal(P1, P), t  # (the penalties only read)
# the update after a draw (the decay, presence / repetition on the token, counter + 1), against
# the torch path: rows with a zero and a non-zero penalty on their token (row 2's token decayed
# to 0: presence), decays of 1 and below, tokens in the first, a middle and the last column
# block (row 1's at decay 1 too: the kernel's token-only path in a block past the first), an
# inactive row, no mask
from server.model.sampler import BatchSampler, SamplingBatch
P[1, 8200] = 0.0
for active in (torch.tensor([True, True, False, True, True]), None):
    sb = SamplingBatch.empty(B, V)
    sb.penalties.copy_(P)
    sb.presence.copy_(torch.tensor([0.5, 1.0, 2.0, -0.3, 0.0]))
    sb.repetition.copy_(torch.tensor([0.1, 0.2, 0.3, 0.4, -0.5]))
    sb.decay.copy_(torch.tensor([0.99, 1.0, 0.0, 0.996, 1.0]))
    sb.counter.copy_(torch.tensor([3, 0, 9, 1, 2]))
    tokens = torch.tensor([5, 8200, 4100, 9999, 0])
    want = SamplingBatch(**{k: getattr(sb, k).clone() for k in sb.__dataclass_fields__})
    BatchSampler._update(want, tokens, active)
    st.update(sb.penalties, tokens, sb.presence, sb.repetition, sb.decay, active, sb.counter)
    assert torch.equal(sb.penalties, want.penalties) and torch.equal(sb.counter, want.counter)
    assert not torch.equal(sb.penalties, P)
    assert not torch.equal(sb.penalties[0], P[0]) and sb.penalties[0, 5] != P[0, 5] * 0.99
    assert sb.penalties[1, 8200] == 1.0  # (presence: decay 1, its entry 0, column block 2)
    assert torch.equal(sb.penalties[2], P[2]) if active is not None else \
        sb.penalties[2].count_nonzero() == 1
print("prepare ok")
"""


def test_fused_prepare_pass_is_the_torch_path_bit_for_bit():
    """The CUDA sampler's kernels (the one-pass prologue: penalties, temperature; the update
    after a draw: decay, presence/repetition, counter), through Triton's CPU interpreter,
    against the torch operations they replace."""
    pytest.importorskip("triton")
    from model_cases import run_interpreted

    assert "prepare ok" in run_interpreted(_PREPARE, timeout=120).stdout


_TOPK = """
import torch
from server.model.kernels import sampling_triton as st
g = torch.Generator().manual_seed(0)
counts = []  # each _candidates call's counts (topk calls it through the module): the path taken
_candidates = st._candidates
def spy(x, k):
    cand, cnt = _candidates(x, k)
    counts.append(cnt.clone())
    return cand, cnt
st._candidates = spy
# partial last blocks (V not a multiple), k = 1, 40, 64, tiny rows (one sub-block); -inf and
# huge values (in different rows where R > 1)
for R, V, k in ((2, 5000, 40), (2, 1024, 1), (1, 3000, 64), (2, 16, 1), (1, 1, 1)):
    x = torch.randn(R, V, generator=g) * 3
    x[0, 17 % V], x[-1, 5 % V] = -float("inf"), 1e30
    v, i = st.topk(x, k)
    want_v, want_i = torch.topk(x, k, dim=1)
    assert torch.equal(v, want_v) and torch.equal(i, want_i), (v, want_v, i, want_i)
# equal values: the lower column first; a row of negatives; a flat row (every value a
# candidate: more than MAX_CANDIDATES, the slow path) and a row with -inf everywhere but 3 columns
x = torch.tensor([[1.0, 3.0, 3.0, -2.0, 3.0, 0.5] * 200, [-5.0, -1.0, -3.0, -1.0, -7.0, -0.5] * 200,
                  [0.25] * 1200, [-float("inf")] * 1200])
x[3, [7, 900, 11]] = torch.tensor([2.0, 1.0, 2.0])
v, i = st.topk(x, 8)
assert counts[-1][2] > st.MAX_CANDIDATES, counts[-1]  # the flat row took the slow path
assert v[0].tolist() == [3.0] * 8 and i[0].tolist() == [1, 2, 4, 7, 8, 10, 13, 14], i
assert v[1].tolist() == [-0.5] * 8 and i[1].tolist() == [5 + 6 * j for j in range(8)], (v, i)
assert v[2].tolist() == [0.25] * 8 and i[2].tolist() == list(range(8)), (v, i)
assert v[3, :3].tolist() == [2.0, 2.0, 1.0] and i[3, :3].tolist() == [7, 11, 900], (v, i)
assert v[3, 3:].eq(-float("inf")).all()
# logits clustered by token id (a context in one script: most blocks of the vocabulary hold
# unlikely tokens; here 2 of 16 blocks of 1,024 are likely): at most 16 k candidates, no slow
# path, the values and columns of torch.topk (k = TOPK_MAX: up to MAX_CANDIDATES candidates)
x = torch.randn(2, 16384, generator=g) * 2
x[:, 2048:] -= 8.0
x[1, 5000:5016] = 20.0  # a sub-block of equal values, the largest
k = st.TOPK_MAX
v, i = st.topk(x, k)
cnt = counts[-1]
assert (cnt <= 16 * k).all() and (cnt >= k).all() and (cnt <= st.MAX_CANDIDATES).all(), cnt
want_v, want_i = torch.topk(x, k, dim=1)
assert torch.equal(v, want_v) and torch.equal(i[0], want_i[0]), k
assert torch.equal(x.gather(1, i), v) and i[1].unique().numel() == k  # ties: any order
assert i[1, :16].tolist() == list(range(5000, 5016))  # the equal values, lower column first
# the draw in the last launch: the torch draw's token on the same candidates, for k below and
# at kmax (6: a top-k of 8 keys, two past kmax), top-p off / 0 / between, uniforms at 0, mid
# and just below 1 (one launch: each row its own k, top-p and uniform)
from server.model.sampler import _draw_prefix
V, kmax = 3000, 6
k = torch.tensor([6, 1, 3, 6, 4, 6, 6, 3, 6])
top_p = torch.tensor([1.0, 1.0, 0.5, 0.0, 0.9, 0.3, 1.0, 0.5, 0.0])
hi = 1 - 2 ** -53
u = torch.tensor([hi, 0.5, hi, 0.0, 0.5, hi, 0.0, 0.5, hi], dtype=torch.float64)
R = len(k)
u[[1, 4, 7]] = torch.rand(3, generator=g, dtype=torch.float64)  # mid
x = torch.randn(R, V, generator=g) * 2
vals, idx = torch.topk(x, kmax, dim=1)
want = idx.gather(1, _draw_prefix(vals, k, top_p, u)[:, None]).squeeze(1)
got = st.topk_draw(x, kmax, k, top_p, u)
assert torch.equal(got, want), (got, want, u)
assert want[0] == idx[0, -1] and want[3] == idx[3, 0]  # u just below 1: the last; top-p 0
print("topk ok")
"""


def test_fused_topk_is_torch_topk():
    """The CUDA sampler's top-k candidates (block maxima, a threshold, a sort of the
    candidates), through Triton's CPU interpreter: the values of torch.topk in its order, their
    columns, ties broken towards the lower column, flat rows (the slow path) included."""
    pytest.importorskip("triton")
    from model_cases import run_interpreted

    assert "topk ok" in run_interpreted(_TOPK, timeout=300).stdout


_SAMPLE = """
import sys
import torch
from server.model.kernels import sampling_triton as st
sys.path.insert(0, "test")
from server.model.sampler import BatchSampler
import test_sampler as ts

class Interpreted(BatchSampler):  # the CUDA path's kernels, run by Triton's CPU interpreter
    def _kernels(self, t):
        return st

V = 3000
logits = torch.randn(7, V, generator=torch.Generator().manual_seed(3)) * 2
# rows: greedy; top-k (k 5, 4, 6 and 1: the kernels' top-k of 8, the largest k 6; row 2
# inactive); top-p alone and top-k 2000 (sorted, the torch path); min_p on rows 1, 4, 5 (row
# 4's 0.95 leaves fewer finite logits than its k: the kernels' top-k over -inf, as a grammar's
# mask leaves)
params = dict(temperature=[0.0, 1.0, 0.8, 1.0, 0.7, 1.0, 1.3], top_k=[0, 5, 4, 0, 6, 2000, 1],
              top_p=[1.0, 0.9, 1.0, 0.8, 0.5, 1.0, 1.0], seed=[1, 2, 3, 4, 5, 6, 7], presence=0.4,
              repetition=0.2, decay=0.99, min_p=[0.0, 0.3, 0.0, 0.0, 0.95, 0.1, 0.0])
plain, fused = ts._rows(7, V, **params), ts._rows(7, V, **params)
P0 = torch.rand(7, V, generator=torch.Generator().manual_seed(4))  # from earlier steps: the
P0[P0 < 0.9] = 0.0  # inactive row's are not decayed
for sb in (plain, fused):
    sb.penalties.copy_(P0)
active = torch.tensor([True, True, False, True, True, True, True])
U = BatchSampler(V).uniforms(plain, 3)  # a pulse's uniforms: non-contiguous columns
for s in range(3):
    want = BatchSampler(V).sample(logits, plain, active=active, u=U[:, s])
    got = Interpreted(V).sample(logits, fused, active=active, u=U[:, s])
    assert torch.equal(got, want), (s, got, want)
assert torch.equal(fused.penalties, plain.penalties) and torch.equal(fused.counter, plain.counter)
print("sample ok")
"""


def test_sample_through_the_cuda_kernels_is_the_torch_path():
    """BatchSampler.sample with its CUDA kernels (prepare with an active mask, the top-k draw on
    a subset of rows with their own k and top-p, the update), run by Triton's CPU interpreter:
    the torch path's tokens, penalties and counters, step after step, with a pulse's uniforms."""
    pytest.importorskip("triton")
    from model_cases import run_interpreted

    assert "sample ok" in run_interpreted(_SAMPLE, timeout=300).stdout


@pytest.mark.parametrize("vocab", [16, 64, 65536])
def test_tied_logits_give_a_row_the_same_token_whatever_its_neighbours_k(vocab):
    """Rows of top-k share one top-k of the batch's largest k; tied logits (bf16 logits tie
    often) were ordered and cut by that k, so a seeded row's token changed with its neighbours'
    top_k, and top_k 1 could differ from greedy (session 36's QA: tokens 4 and 20 for the same
    row). Ties now go to the lower column, as in the CUDA kernels and a stable sort."""
    logits = torch.zeros(vocab)
    logits[[4, 10, 12, 13, 15]] = 3.0
    logits[[1, 9, 11]] = 2.0

    def tokens(ks, seed):
        sb = SamplingBatch.empty(len(ks), vocab)
        for i, k in enumerate(ks):
            sb.top_k[i], sb.seed[i] = k, seed
        return BatchSampler(vocab).sample(logits.expand(len(ks), vocab).contiguous(), sb)[0]

    greedy = SamplingBatch.empty(1, vocab)
    greedy.temperature.zero_()
    assert BatchSampler(vocab).sample(logits[None].clone(), greedy).item() == 4
    for seed in range(40):
        assert tokens([1], seed) == tokens([1, 2], seed) == tokens([1, 9], seed) == 4
        for k in (2, 3, 6, 7):
            alone = tokens([k], seed)
            assert alone in [4, 10, 12, 13, 15, 1, 9][:k]  # the lower columns of a tie
            assert all(tokens([k, other], seed) == alone for other in (8, 16, 300))


def test_top_k_zero_with_top_p_one_draws_in_vocabulary_order():
    """top_k <= 0 is off: with top_p 1 a row samples the whole distribution in vocabulary order
    (one cumulative sum, no sort), so a seed's token is the inverse CDF of that order (a
    mutant read top_k 0 as a cut: other tokens, and a sort each step; session 43's review)."""
    V, B = 1000, 16
    logits = torch.randn(B, V, generator=torch.Generator().manual_seed(0)) * 3
    sb = SamplingBatch.empty(B, V)
    sb.top_k[:B // 2] = 0
    sb.top_k[B // 2:] = -1
    sb.seed[:] = torch.arange(B) + 7
    u = uniform(sb.seed, sb.counter)
    w = torch.exp(logits - logits.amax(dim=1, keepdim=True)).double()
    cum = torch.cumsum(w, dim=1)
    expected = torch.searchsorted(cum, (u * cum[:, -1])[:, None], right=True).squeeze(1)
    assert BatchSampler(V).sample(logits, sb).tolist() == expected.tolist()
