"""``RWKV7.prefill(..., mid=m, mid_state=...)``: the state after the first m tokens of a pass,
handed out by the same pass, equals bit for bit the state a prefill of those m tokens leaves
(a split-invariant model), and the pass's own results do not change. The prefiller keeps a chat
turn's boundary this way instead of computing the turn's new message a second time."""

import pytest
import torch
from model_cases import one_thread, run_interpreted

from server.model.checkpoint import infer_config
from server.model.cuda_graph import GraphedPrefill
from server.model.forward import RWKV7
from server.model.random import make_random_state_dict


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    with one_thread():
        yield


def _compare(m, toks, mids, seed=1):
    """Whether a prefill of ``toks`` exporting the states after ``mids`` (a position or a list)
    gives the logits and state of one without, and each exported state that of a prefill of
    ``toks[:mid]`` alone, from the same random start state."""
    mids = [mids] if isinstance(mids, int) else mids
    start = m.new_state(1)
    for i, t in enumerate((start.wkv, start.shift)):  # (drawn on the CPU: the same on CUDA)
        t.copy_(torch.randn(t.shape, generator=torch.Generator().manual_seed(seed + i)))
    a, out = start.clone(), m.new_state(len(mids))
    la = m.prefill([toks], a, mid=mids if len(mids) > 1 else mids[0], mid_state=out)
    b = start.clone()
    same = [torch.equal(la, m.prefill([toks], b)), torch.equal(a.wkv, b.wkv),
            torch.equal(a.shift, b.shift)]
    for k, mid in enumerate(mids):
        c = start.clone()
        m.prefill([toks[:mid]], c, logits=False)
        got = out.select([k])
        same += [torch.equal(got.wkv, c.wkv), torch.equal(got.shift, c.shift)]
    return same


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_export_inside_a_pass_and_at_a_pass_boundary(dtype, padded):
    """prefill_chunk 64, 150 tokens: exports inside the first, second and last pass and at a
    boundary between passes (64, 128), one or two a call (in one pass or in two);
    ``padded``: GraphedPrefill's padded pass (eager here)."""
    sd = make_random_state_dict(2, 128, 512, seed=3)
    m = RWKV7(sd, infer_config(sd), dtype=dtype, prefill_chunk=64)
    assert m.split_invariant and m.prefill_align == 32
    if padded:
        m._graphed_prefill = GraphedPrefill(m._forward, m.new_state, graphs=False)
    toks = torch.randint(0, 500, (150,), generator=torch.Generator().manual_seed(0)).tolist()
    for mid in (32, 64, 96, 128, [32, 96], [64, 128], [96, 128]):
        assert all(_compare(m, toks, mid)), mid


def test_bad_export_points_are_refused():
    sd = make_random_state_dict(1, 64, 300, seed=1)
    m = RWKV7(sd, infer_config(sd), dtype=torch.float32)
    out, st = m.new_state(1), m.new_state(2)
    # unaligned, at/after the end, two sequences, three points
    for mid, rows in ((16, 1), (64, 1), (96, 1), (32, 2), ([32, 32, 32], 1)):
        with pytest.raises(ValueError, match="mid"):
            m.prefill([list(range(1, 65))] * rows, st if rows == 2 else m.new_state(1),
                      mid=mid, mid_state=out)
    with pytest.raises(ValueError, match="mid_state"):  # a row per point
        m.prefill([list(range(1, 65))], m.new_state(1), mid=32, mid_state=m.new_state(2))


# the CUDA path's kernels in Triton's interpreter: ln_mix's export (the fused forward, with the
# plain torch WKV on the CPU) and the chunked and token-loop WKV kernels' export. Points inside
# a pass only: at a pass boundary (64) no pass gets an export point (its passes are those of the
# run without export) and RWKV7.prefill hands out the state between passes, the same code on
# every forward (test_export_inside_a_pass_and_at_a_pass_boundary). The token loop runs 32 of a
# head's 64 value rows a program (still two programs a head, each storing its rows of the
# exported state; the default here, 8 rows, takes 4x the programs: in the interpreter, most of
# the WKV part's time)
_INTERPRETED = """
import torch
from server.model.checkpoint import infer_config
from server.model.cuda_graph import GraphedPrefill
from server.model.forward import RWKV7
from server.model.kernels import wkv_triton as w
from server.model.random import make_random_state_dict
sd = make_random_state_dict(1, 128, 512, seed=3)  # one layer: the export is each layer's alike
m = RWKV7(sd, infer_config(sd), dtype=torch.float32, prefill_chunk=64, fused=True)
assert m._fused is not None
m._graphed_prefill = GraphedPrefill(m._forward, m.new_state, graphs=False)
toks = torch.randint(0, 500, (100,), generator=torch.Generator().manual_seed(0)).tolist()
start = m.new_state(1)
start.wkv.normal_(generator=torch.Generator().manual_seed(1))
b = start.clone()
lb = m.prefill([toks], b)  # without export (computed once: the interpreter is slow)
prefix = {}  # mid -> the state after toks[:mid], fed alone
for mid in (32, 96):
    prefix[mid] = start.clone()
    m.prefill([toks[:mid]], prefix[mid], logits=False)
for mids in ([32], [32, 96]):  # one point (MID=1), then one in each pass (MID=2)
    a, out = start.clone(), m.new_state(len(mids))
    la = m.prefill([toks], a, mid=mids, mid_state=out)
    ok = [torch.equal(la, lb), torch.equal(a.wkv, b.wkv), torch.equal(a.shift, b.shift)]
    for k, mid in enumerate(mids):
        got, c = out.select([k]), prefix[mid]
        ok += [torch.equal(got.wkv, c.wkv), torch.equal(got.shift, c.shift)]
    assert all(ok), (mids, ok)
g = torch.Generator().manual_seed(2)
B, T, H, N = 1, 40, 2, 64
for sdt in (torch.float32, torch.float16):
    xs = [torch.randn(B, T, H, N, generator=g) * 0.5 for _ in range(6)]
    xs[1] = torch.sigmoid(xs[1]) * 0.5 + 0.45  # the decay
    xs[4] = torch.nn.functional.normalize(xs[4], dim=-1)
    xs[5] = torch.sigmoid(xs[5])
    S0 = (torch.randn(B, H, N, N, generator=g) * 0.3).to(sdt)
    for run, mids in ((lambda S, x, **kw: w.wkv_chunk_triton(S, *x, round_chunks=True, **kw),
                       [32, 16]),
                      (lambda S, x, **kw: w.wkv_seq_triton(S, *x, rows=32, **kw), [23, 5])):
        S1, S2 = S0.clone(), S0.clone()
        S_mid = torch.zeros(len(mids), H, N, N, dtype=sdt)
        y1 = run(S1, xs, mid=torch.tensor(mids), S_mid=S_mid)
        y2 = run(S2, xs)
        assert torch.equal(y1, y2) and torch.equal(S1, S2), sdt
        for k, mid in enumerate(mids):
            S3 = S0.clone()
            run(S3, [x[:, :mid] for x in xs])
            assert torch.equal(S_mid[k:k + 1], S3), (sdt, mid)
        S_none = torch.full_like(S0, 7.0)  # a point no chunk ends at: untouched
        run(S0.clone(), xs, mid=torch.tensor([31 if mid == 32 else 0]), S_mid=S_none)
        assert (S_none == 7.0).all()
print("export ok")
"""


def test_export_in_the_cuda_kernels_interpreted():
    pytest.importorskip("triton")
    out = run_interpreted(_INTERPRETED, timeout=400)
    assert "export ok" in out.stdout, out.stdout + out.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("form", ["fused", "plain", "torch_wkv"])
def test_export_on_cuda_in_graphs(form):
    """On CUDA, from captured prefill graphs (the export point is a graph input): fused
    kernels, the plain forward with the Triton WKV, and with the torch WKV (a device-side
    select per chunk while capturing); fp16 weights and state."""
    sd = make_random_state_dict(2, 256, 512, seed=3)
    m = RWKV7(sd, infer_config(sd), device="cuda", dtype=torch.float16,
              state_dtype=torch.float16, prefill_chunk=128, fused=form == "fused",
              wkv_impl="torch" if form == "torch_wkv" else "auto")
    assert m._graphed_prefill is not None and (m._fused is not None) == (form == "fused")
    toks = torch.randint(0, 500, (300,), generator=torch.Generator().manual_seed(0)).tolist()
    top = 288 - 288 % m.prefill_align
    for mid in (m.prefill_align, 64, 128, 160, top, [64, 160], [128, top]):
        assert all(_compare(m, toks, mid)), (form, mid)
    assert any(g.graph is not None for g in m._graphed_prefill.graphs.values())
