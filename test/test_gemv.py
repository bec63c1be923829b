"""The skinny-product kernel (server/model/kernels/gemv_triton.py) against fp32 products, with
and without a split of K, through Triton's CPU interpreter (and on CUDA, marker gpu)."""

import pytest
import torch
from model_cases import run_interpreted

# every epilogue, with limits (the zero-padded LoRA stacks) and without, 1, 5 and 40 rows (40:
# one row block of 64, and three of 16, the last one part-filled, as a short prompt's pass would
# use), K whole and split 3 ways (slices of 128, 128 and 64 of K = 320: the last one short, and
# with the limits some slices empty; a configured 4 runs as the same 3 slices): the result
# within fp16 rounding of the fp32 product, the same bits on a second call, counters back at 0.
# On CUDA every combination; in the slow interpreter (programs run one by one: the bits cannot
# depend on their order) rows in blocks of 16 at 40 rows for two epilogues with limits and two
# without, and the second call at 5 rows split
GEMV_CHECK = """
import torch
from server.model.kernels import gemv_triton as gt
dev = "cuda" if torch.cuda.is_available() else "cpu"
gen = torch.Generator(device=dev).manual_seed(0)
def rnd(*shape, dtype=torch.float16):
    return torch.randn(*shape, generator=gen, device=dev).to(dtype)
G, N, K = 4, 48, 320
lim = torch.tensor([[40, 320], [16, 200], [48, 64], [0, 320]], dtype=torch.int32, device=dev)
worst = 0.0
for epi in (gt.EPI_STORE, gt.EPI_RELU2, gt.EPI_ADD, gt.EPI_LORA):
    for limits in (None, lim):
        for M in (1, 5, 40):
            x, w = rnd(G, M, K), rnd(G, N, K) * 0.1
            base = rnd(G, M, N, dtype=torch.float32)
            want = []
            for g in range(G):
                n, k = lim[g].tolist() if limits is not None else (N, K)
                y = torch.zeros(M, N, device=dev)
                y[:, :n] = x[g, :, :k].float() @ w[g, :n, :k].float().T
                if epi == gt.EPI_RELU2:
                    y = y.relu() ** 2
                if epi == gt.EPI_LORA and g in (1, 3):
                    y = y.tanh() if g == 1 else y.sigmoid()
                if epi == gt.EPI_ADD:
                    y = y + base[g]
                want.append(y)
            want = torch.stack(want)
            scratch = gt.GemvScratch(dev, G * N, M)
            blocks16 = M == 40 and (dev == "cuda" or (epi in (gt.EPI_RELU2, gt.EPI_LORA))
                                    == (limits is not None))
            for split, bm in ((1, ()), (3, ())) + (((1, (16,)), (3, (16,))) if blocks16 else ()):
                got = []
                for _ in range(2 if dev == "cuda" or (M == 5 and split > 1) else 1):
                    out = base.clone() if epi == gt.EPI_ADD else torch.full(
                        (G, M, N), 7.0, dtype=torch.float16, device=dev)
                    gt.gemv(x, w, out=out, epi=epi, limits=limits,
                            config=(16, 64, 4, 2, split, *bm), scratch=scratch)
                    got.append(out)
                assert all(torch.equal(got[0], o) for o in got[1:]), (epi, M, split,
                                                                       "not the same bits")
                assert int(scratch.counters.abs().sum()) == 0, "a counter was left non-zero"
                have = got[0].float()
                for g in range(G):  # rows past a group's limit are not written
                    n = int(lim[g, 0]) if limits is not None else N
                    e = ((have[g, :, :n] - want[g, :, :n]).abs().max()
                         / want[g, :, :n].abs().max().clamp_min(1e-6)).item() if n else 0.0
                    worst = max(worst, e)
                    assert e < 4e-3, (epi, limits is not None, M, split, g, e)
                    if n < N and epi != gt.EPI_ADD:
                        assert (have[g, :, n:] == 7.0).all()
# two products in one launch: the same bits as each alone (same configurations), both split
for M in (1, 5, 17):
    xa, wa, xb, wb = rnd(3, M, K), rnd(3, N, K), rnd(4, M, K), rnd(4, N, K)
    ca, cb = (16, 64, 4, 2, 3), (16, 128, 4, 2, 2)
    scratch = gt.GemvScratch(dev, 7 * N, M)
    alone = (gt.gemv(xa, wa, epi=gt.EPI_RELU2, config=ca, scratch=scratch),
             gt.gemv(xb, wb, epi=gt.EPI_LORA, limits=lim, config=cb, scratch=scratch))
    both = gt.gemv_pair(dict(x=xa, w=wa, epi=gt.EPI_RELU2, config=ca),
                        dict(x=xb, w=wb, epi=gt.EPI_LORA, limits=lim, config=cb), scratch)
    own = gt.gemv_pair(dict(x=xa, w=wa, epi=gt.EPI_RELU2, config=ca),  # its own scratch
                       dict(x=xb, w=wb, epi=gt.EPI_LORA, limits=lim, config=cb))
    for pair in (both, own):
        for g in range(4):
            n = int(lim[g, 0])
            assert torch.equal(alone[1][g, :, :n], pair[1][g, :, :n]), (M, g)
        assert torch.equal(alone[0], pair[0]), M
    assert int(scratch.counters.abs().sum()) == 0
assert gt.split_of(2560, 512, 8) == (5, 512) and gt.split_of(10240, 128, 8) == (8, 1280)
assert gt.split_of(2560, 256, 4) == (4, 768) and gt.split_of(256, 256, 8) == (1, 256)
assert [gt.block_m(m) for m in (1, 16, 17, 152, 256)] == [16, 16, 32, 64, 64]
assert gt.block_m(152, 256) == 256 and gt.block_m(40, 16) == 16
try:
    gt.gemv(rnd(1, 257, K), rnd(1, N, K))
    raise SystemExit("257 rows accepted")
except ValueError:
    pass
for m, scratch in ((1, gt.GemvScratch(dev, 32)), (17, gt.GemvScratch(dev, 4 * N))):
    try:  # too few output rows; partial tiles of 16 input rows for 17
        gt.gemv(rnd(1, m, K), rnd(1, N, K), config=(16, 64, 4, 2, 2), scratch=scratch)
        raise SystemExit("a scratch too small accepted")
    except ValueError:
        pass
print(f"gemv ok, worst rel err {worst:.1e}")
"""


def test_gemv_in_interpreter():
    pytest.importorskip("triton")
    out = run_interpreted(GEMV_CHECK, timeout=300)
    assert "gemv ok" in out.stdout, out.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gemv_on_cuda():
    exec(compile(GEMV_CHECK, "gemv_check", "exec"), {})
