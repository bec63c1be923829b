"""``decode_triton.time_mix_seq``: a batched prefill's time mix between its products in one
kernel (pre_wkv, the WKV token loop and post_wkv; no fp32 intermediates in memory), against the
three launches it replaces (``fused_triton.pre_wkv``, ``wkv_triton.wkv_seq_triton``,
``fused_triton.post_wkv``): under Triton's CPU interpreter (the same bits) and on CUDA, and on
CUDA through a model's batched prefill against the same pass with it turned off."""

from __future__ import annotations

import pytest
import torch

from model_cases import run_interpreted

# 3 sequences of 5 tokens, 3 heads: sequence 0 padded at its end (two identity steps), sequence 2
# at its start; each state dtype, the first layer (v is the value) and a later one (v mixed with
# v_first), with the served launch options, then with small chunks and a small grid. The token
# loop's reference takes a head's 64 value rows a program in the interpreter
SEQ_CHECK = """
import torch
from server.model.kernels import decode_triton as d, fused_triton as f, wkv_triton as w
dev = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator(device=dev).manual_seed(0)
H, N, B, T = 3, 64, 3, 5
C, R = H * N, B * T
def rnd(*shape, scale=1.0, dtype=torch.float16):
    return (torch.randn(*shape, generator=g, device=dev) * scale).to(dtype)
worst, exact = 0.0, True
served = dict(d.SEQ_VARIANT)
cases = [(sdt, first, served) for sdt in (torch.float32, torch.float16) for first in (True, False)]
# chunks of 2 tokens (two whole, one partial) and 2 programs for the 9 (sequence, head) items:
# the chunk loop, its scratch reused, and the persistent grid's loop over items
cases += [(torch.float16, False, dict(served, chunk=2, grid=2))]
for sdt, first, variant in cases:
    d.SEQ_VARIANT.clear()
    d.SEQ_VARIANT.update(variant)
    r, k, v = rnd(3, R, C).unbind(0)  # (views of one tensor, as the r/k/v product gives)
    lora = rnd(4, R, C)
    vf = None if first else rnd(R, C)
    keep = torch.ones(R, dtype=torch.int8, device=dev)
    keep[T - 2:T] = 0
    keep[2 * T] = 0
    w0, a0, v0 = (rnd(C) for _ in range(3))
    kk, ka, rk, lw, lb = (rnd(C, dtype=torch.float32) for _ in range(5))
    S0 = rnd(B, H, N, N, scale=0.3, dtype=sdt)
    S1, S2 = S0.clone(), S0.clone()
    wv, kp, vv, kap, a, bonus = f.pre_wkv(r, k, v, lora, vf, keep, w0, a0, v0, kk, ka, rk, H)
    y = w.wkv_seq_triton(S1, *(t.view(B, T, H, N) for t in (r, wv, kp, vv, kap, a)),
                         rows=None if dev == "cuda" else N)
    want = f.post_wkv(y.view(R, C), vv, lora[3], bonus, lw, lb, 1e-5, r.dtype)
    got = d.time_mix_seq(S2, r, k, v, lora, vf, keep, w0, a0, v0, kk, ka, rk, lw, lb,
                         f.DECAY_SCALE, 1e-5, T)
    assert got.dtype == r.dtype and got.shape == (R, C)
    exact = exact and torch.equal(got, want) and torch.equal(S1, S2)
    for name, want_t, have in (("out", want, got), ("S", S1, S2)):
        e = ((have.float() - want_t.float()).abs().max() / want_t.float().abs().max()).item()
        worst = max(worst, e)
        assert e < (2e-3 if sdt == torch.float16 or name == "out" else 1e-5), (
            sdt, first, variant, name, e)
d.SEQ_VARIANT.clear()
d.SEQ_VARIANT.update(served)
print(f"seq kernel ok, worst rel err {worst:.1e}, bit-equal {exact}")
"""


def test_seq_kernel_in_interpreter():
    pytest.importorskip("triton")
    out = run_interpreted(SEQ_CHECK, timeout=300)
    assert "seq kernel ok" in out.stdout and "bit-equal True" in out.stdout, out.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_seq_kernel_on_cuda(capsys):
    exec(SEQ_CHECK, {})
    out = capsys.readouterr().out
    print(out)
    assert "seq kernel ok" in out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("state_dtype", [torch.float32, torch.float16])
def test_batched_prefill_one_kernel_on_cuda(state_dtype, monkeypatch):
    """A batched prefill of unequal prompts (padded) whose WKV takes the one-kernel token loop:
    the logits and states the three-launch pass gives, and the kernel ran in every layer."""
    from model_cases import make_case

    from server.model.forward import RWKV7
    from server.model.kernels import decode_triton, wkv_triton

    case = make_case("c512")
    H = case.cfg.n_head
    batch = -(-4 * wkv_triton._sm_count(torch.device("cuda")) // H)  # four items an SM
    assert decode_triton.seq_programs_fill(batch, H, torch.device("cuda"))
    assert not decode_triton.seq_programs_fill(batch - 1, H, torch.device("cuda"))
    g = torch.Generator().manual_seed(1)
    V = case.cfg.vocab_size
    prompts = [torch.randint(0, V, (2 + 7 * i % 29,), generator=g).tolist() for i in range(batch)]
    model = RWKV7(case.sd, case.cfg, device="cuda", dtype=torch.float16, state_dtype=state_dtype,
                  fused=True)
    calls = []
    real = decode_triton.time_mix_seq
    monkeypatch.setattr(decode_triton, "time_mix_seq",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    outs = []
    for on in (True, False):
        model._fused.seq_one_kernel = on
        state = model.new_state(batch)
        logits = model.prefill(prompts, state)
        outs.append((logits.float(), state.wkv.float(), state.shift.float()))
        if on:
            assert len(calls) == case.cfg.n_layer, len(calls)
    assert len(calls) == case.cfg.n_layer  # (not when turned off)
    for name, a, b in zip(("logits", "wkv", "shift"), outs[0], outs[1]):
        err = ((a - b).abs().max() / b.abs().max()).item()
        print(f"{name}: rel err {err:.1e}, equal {torch.equal(a, b)}")
        assert torch.isfinite(a).all() and err < 1e-3, (name, err)
