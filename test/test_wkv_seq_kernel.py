"""``decode_triton.time_mix_seq``: a batched prefill's time mix between its products in one
kernel (pre_wkv, the WKV token loop and post_wkv; no fp32 intermediates in memory), against the
three launches it replaces (``fused_triton.pre_wkv``, ``wkv_triton.wkv_seq_triton``,
``fused_triton.post_wkv``): under Triton's CPU interpreter (the same bits) and on CUDA, and on
CUDA through a model's batched prefill against the same pass with it turned off."""

from __future__ import annotations

import pytest
import torch

from model_cases import run_interpreted

# 3 sequences, 3 heads: each state dtype, the first layer (v is the value) and a later one (v
# mixed with v_first) with padding, with the served launch options; then small chunks and grids,
# no padding, bf16 and fp32 products, a state whose blocks are not contiguous. The token loop's
# reference takes a head's 64 value rows a program in the interpreter
SEQ_CHECK = """
import torch
from server.model.kernels import decode_triton as d, fused_triton as f, wkv_triton as w
dev = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator(device=dev).manual_seed(0)
H, N, B = 3, 64, 3
C = H * N
def rnd(*shape, scale=1.0, dtype=torch.float16):
    return (torch.randn(*shape, generator=g, device=dev) * scale).to(dtype)
worst, exact = 0.0, True
served = dict(d.SEQ_VARIANT)
f16, f32, bf16 = torch.float16, torch.float32, torch.bfloat16
# (state dtype, first layer, launch options, T, padded, r's dtype, S's [N, N] blocks transposed)
cases = [(sdt, first, served, 5, True, f16, False) for sdt in (f32, f16) for first in (True, False)]
cases += [
    # chunks of 2 tokens (two whole, one partial) and 2 programs for the 9 (sequence, head)
    # items: the chunk loop, its scratch reused, and the persistent grid's loop over items
    (f16, False, dict(served, chunk=2, grid=2), 5, True, f16, False),
    # no padding (keep None), the first layer, T a multiple of the chunk, bf16 products
    (f32, True, dict(served, chunk=4, grid=4), 8, False, bf16, False),
    # fp32 products, and a state whose [N, N] blocks are not contiguous (copied in and back)
    (f32, False, served, 5, True, f32, True)]
try:
    for sdt, first, variant, T, padded, dt, strided in cases:
        d.SEQ_VARIANT.clear()
        d.SEQ_VARIANT.update(variant)
        R = B * T
        r, k, v = rnd(3, R, C, dtype=dt).unbind(0)  # (views of one tensor, as the product)
        lora = rnd(4, R, C, dtype=dt)
        vf = None if first else rnd(R, C, dtype=dt)
        keep = None
        if padded:  # sequence 0 padded at its end (two identity steps), sequence 2 at its start
            keep = torch.ones(R, dtype=torch.int8, device=dev)
            keep[T - 2:T] = 0
            keep[2 * T] = 0
        w0, a0, v0 = (rnd(C, dtype=dt) for _ in range(3))
        kk, ka, rk, lw, lb = (rnd(C, dtype=f32) for _ in range(5))
        S0 = rnd(B, H, N, N, scale=0.3, dtype=sdt)
        S1, S2 = S0.clone(), S0.clone()
        if strided:
            S1, S2 = S1.transpose(-1, -2), S2.transpose(-1, -2)
        wv, kp, vv, kap, a, bonus = f.pre_wkv(r, k, v, lora, vf, keep, w0, a0, v0, kk, ka, rk,
                                              H)
        y = w.wkv_seq_triton(S1, *(t.view(B, T, H, N) for t in (r, wv, kp, vv, kap, a)),
                             rows=None if dev == "cuda" else N)
        want = f.post_wkv(y.view(R, C), vv, lora[3], bonus, lw, lb, 1e-5, r.dtype)
        got = d.time_mix_seq(S2, r, k, v, lora, vf, keep, w0, a0, v0, kk, ka, rk, lw, lb,
                             f.DECAY_SCALE, 1e-5, T)
        assert got.dtype == r.dtype and got.shape == (R, C)
        exact = exact and torch.equal(got, want) and torch.equal(S1, S2)
        for name, want_t, have in (("out", want, got), ("S", S1, S2)):
            e = ((have.float() - want_t.float()).abs().max()
                 / want_t.float().abs().max()).item()
            worst = max(worst, e)
            assert e < (2e-3 if sdt == f16 or dt != f32 or name == "out" else 1e-5), (
                sdt, first, variant, T, name, e)
finally:
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
    the logits and states the three-launch pass gives, and the kernel ran in every layer. (The
    prompts' lengths, 33-48, pad to one width, one pass (``pass_groups``), of a whole chunk and
    a part of one at the served 32 tokens.)"""
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
    prompts = [torch.randint(0, V, (33 + 7 * i % 16,), generator=g).tolist() for i in range(batch)]
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


# fused.py's gate, wired through a model's prefill under the interpreter: a fused fp32 model
# whose WKV is the kernels' dispatcher (on CPU tensors it runs the torch reference), with
# seq_programs_fill answering yes, prefills 5 padded prompts with time_mix_seq in both layers,
# then without it (pre_wkv, the reference token loop, post_wkv): the same logits and states to
# fp32 rounding; at one token a prompt (decode's shape) the kernel is not called
GATE_CHECK = """
import torch
from server.model import kernels
from server.model.checkpoint import infer_config
from server.model.forward import RWKV7
from server.model.kernels import decode_triton
from server.model.random import make_random_state_dict
sd = make_random_state_dict(2, 128, 300, seed=5)
cfg = infer_config(sd)
m = RWKV7(sd, cfg, dtype=torch.float32, state_dtype=torch.float32, fused=True,
          split_invariant=False)
m.wkv_chunk = kernels.wkv_chunk
decode_triton.seq_programs_fill = lambda B, H, device: True
calls = []
real = decode_triton.time_mix_seq
decode_triton.time_mix_seq = lambda *a, **k: calls.append(a[-1]) or real(*a, **k)
prompts = [[(7 * i + j) % 290 + 1 for j in range(n)] for i, n in enumerate((1, 4, 6, 2, 5))]
outs = []
for on in (True, False):
    m._fused.seq_one_kernel = on
    st = m.new_state(len(prompts))
    outs.append((m.prefill(prompts, st), st.wkv.clone(), st.shift.clone()))
assert len(calls) == cfg.n_layer and set(calls) == {6}, calls
for a, b in zip(*outs):
    e = ((a - b).abs().max() / b.abs().max()).item()
    assert e < 1e-5, e
m._fused.seq_one_kernel = True
m.decode(torch.arange(5) + 3, m.new_state(5))
assert len(calls) == cfg.n_layer, calls
print("gate ok")
"""


def test_gate_through_a_model_in_interpreter():
    pytest.importorskip("triton")
    out = run_interpreted(GATE_CHECK, timeout=300)
    assert "gate ok" in out.stdout, out.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("chunk", [16, 32])  # (32 served since session 69)
def test_seq_kernel_many_items_on_cuda(chunk, monkeypatch):
    """At a served pass's scale (64 sequences of 100 tokens, some padded, 40 heads: 2,560 items
    over the persistent grid, four to seven chunks each): two runs give the same bits (a race
    between the kernel's stages would show here), within 2e-3 of the three launches."""
    from server.model.kernels import decode_triton as d, fused_triton as f, wkv_triton as w

    monkeypatch.setitem(d.SEQ_VARIANT, "chunk", chunk)

    g = torch.Generator(device="cuda").manual_seed(2)
    B, T, H, N = 64, 100, 40, 64
    C, R = H * N, B * T

    def rnd(*shape, scale=1.0, dtype=torch.float16):
        return (torch.randn(*shape, generator=g, device="cuda") * scale).to(dtype)

    r, k, v = rnd(3, R, C).unbind(0)
    lora, vf = rnd(4, R, C), rnd(R, C)
    keep = torch.ones(R, dtype=torch.int8, device="cuda")
    for b in range(0, B, 3):  # every third sequence padded at its start by b % 17 tokens
        keep[b * T:b * T + b % 17] = 0
    w0, a0, v0 = (rnd(C) for _ in range(3))
    kk, ka, rk, lw, lb = (rnd(C, dtype=torch.float32) for _ in range(5))
    S0 = rnd(B, H, N, N, scale=0.3)
    args = (r, k, v, lora, vf, keep, w0, a0, v0, kk, ka, rk, lw, lb, f.DECAY_SCALE, 1e-5, T)
    S1, S2, S3 = S0.clone(), S0.clone(), S0.clone()
    got1, got2 = d.time_mix_seq(S1, *args), d.time_mix_seq(S2, *args)
    assert torch.equal(got1, got2) and torch.equal(S1, S2)
    wv, kp, vv, kap, a, bonus = f.pre_wkv(r, k, v, lora, vf, keep, w0, a0, v0, kk, ka, rk, H)
    y = w.wkv_seq_triton(S3, *(t.view(B, T, H, N) for t in (r, wv, kp, vv, kap, a)))
    want = f.post_wkv(y.view(R, C), vv, lora[3], bonus, lw, lb, 1e-5, r.dtype)
    for have, ref in ((got1, want), (S1, S3)):
        e = ((have.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        assert e < 2e-3, e
