"""server/model/wkv.py: the chunked WKV form equals T single steps; identity steps are exact."""

import math

import pytest
import torch

from server.model.wkv import wkv_chunk, wkv_step


def inputs(B, T, H, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    N = 64

    def rnd(scale=1.0):
        return (torch.randn(B, T, H, N, generator=g) * scale).to(dtype)

    w = torch.exp(-math.exp(-0.5) * torch.sigmoid(rnd(3.0).float()))  # decay in (0.54, 1)
    kappa = torch.nn.functional.normalize(rnd().float(), dim=-1)
    a = torch.sigmoid(rnd().float())
    S = torch.randn(B, H, N, N, generator=g)
    return S, rnd(), w, rnd(), rnd(), kappa, a


def steps(S, r, w, k, v, kappa, a):
    return torch.stack([wkv_step(S, *(x[:, t] for x in (r, w, k, v, kappa, a)))
                        for t in range(r.shape[1])], 1)


@pytest.mark.parametrize("T", [1, 5, 32, 33, 100])
def test_chunk_equals_steps_in_fp64(T):
    S, *xs = inputs(2, T, 3, seed=T)
    S64 = S.double()
    y_ref = steps(S64, *(x.double() for x in xs))  # fp64 ground truth
    y = wkv_chunk(S, *xs)
    assert y.dtype == torch.float32 and y.shape == (2, T, 3, 64)
    assert ((y.double() - y_ref).norm() / y_ref.norm()) < 2e-6
    assert ((S.double() - S64).norm() / S64.norm()) < 2e-6


def test_identity_steps_leave_state_bit_exact():
    S, r, w, k, v, kappa, a = inputs(1, 6, 2, seed=3)
    before = S.clone()
    w, k, v, kappa = torch.ones_like(w), k * 0, v * 0, kappa * 0
    wkv_chunk(S, r, w, k, v, kappa, a)
    assert torch.equal(S, before)
    wkv_step(S, r[:, 0], w[:, 0], k[:, 0], v[:, 0], kappa[:, 0], a[:, 0])
    assert torch.equal(S, before)


def test_half_state_and_inputs():
    """fp16 state and fp16 inputs: math in fp32, S cast back once, y in r's dtype."""
    S, *xs = inputs(1, 40, 2, seed=5, dtype=torch.float16)
    S16 = S.half()
    y = wkv_chunk(S16, *xs)
    S32 = S16.float()
    assert y.dtype == torch.float16 and S16.dtype == torch.float16
    y_ref = steps(S.clone(), *(x.float() for x in xs))
    assert ((y.float() - y_ref).norm() / y_ref.norm()) < 5e-3
    assert torch.isfinite(S32).all()


def test_fp64_state_runs_the_chunk_in_fp64():
    S, *xs = inputs(1, 70, 2, seed=9)
    xs = [x.double() for x in xs]
    S_step, S_chunk = S.double(), S.double()
    y_ref = steps(S_step, *xs)
    y = wkv_chunk(S_chunk, *xs)
    assert y.dtype == torch.float64
    assert ((y - y_ref).norm() / y_ref.norm()) < 1e-12
    assert ((S_chunk - S_step).norm() / S_step.norm()) < 1e-12
