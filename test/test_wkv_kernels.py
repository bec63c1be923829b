"""WKV-7 kernels: the torch reference (CPU), the Triton kernels through Triton's CPU interpreter,
and (marker gpu) the Triton kernels on CUDA against the fp64 reference."""

import functools

import pytest
import torch
from model_cases import run_interpreted

from server.model import kernels
from server.model.kernels import check
from server.model.kernels.wkv_torch import wkv_chunk_ref, wkv_chunk_wy, wkv_step_ref

N = 64


def _inputs(B, T, H, dtype=torch.float32, seed=0):
    return (check.random_inputs(B, T, H, dtype, "cpu", seed),
            check.random_state(B, H, dtype, "cpu", seed))


def test_step_ref_matches_transition_matrix_form():
    # S_new = S·(diag(w) - kappa (kappa⊙a)^T) + v k^T, computed as explicit matrix products
    (r, w, k, v, kap, a), S = _inputs(2, 1, 3, torch.float64)
    r, w, k, v, kap, a = (x[:, 0] for x in (r, w, k, v, kap, a))
    G = torch.diag_embed(w) - kap.unsqueeze(-1) @ (kap * a).unsqueeze(-2)   # [B, H, N, N]
    S_want = S @ G + v.unsqueeze(-1) @ k.unsqueeze(-2)
    y_want = (S_want @ r.unsqueeze(-1)).squeeze(-1)
    y = wkv_step_ref(S, r, w, k, v, kap, a)
    assert torch.allclose(S, S_want, rtol=0, atol=1e-13)
    assert torch.allclose(y, y_want, rtol=0, atol=1e-13)


@pytest.mark.parametrize("state_dtype", [torch.float32, torch.float16])
def test_chunk_ref_is_repeated_steps(state_dtype):
    xs, S0 = _inputs(2, 9, 3)
    S_chunk = S0.to(state_dtype, copy=True)
    y_chunk = wkv_chunk_ref(S_chunk, *xs)
    S_steps = S0.to(state_dtype, copy=True).float()  # the chunk casts S back once, at the end
    ys = [wkv_step_ref(S_steps, *(x[:, t] for x in xs)) for t in range(9)]
    assert torch.equal(y_chunk, torch.stack(ys, 1))
    assert torch.equal(S_chunk, S_steps.to(state_dtype))


def test_identity_step_leaves_state_bitwise():
    xs, S = _inputs(2, 1, 3)
    S0 = S.clone()
    ones, zeros = torch.ones(2, 3, N), torch.zeros(2, 3, N)
    wkv_step_ref(S, xs[0][:, 0], ones, zeros, zeros, zeros, xs[5][:, 0])
    assert torch.equal(S, S0)


@pytest.mark.parametrize("T", [1, 7, 16, 40])
def test_chunk_wy_form_matches_sequential(T):
    xs, S0 = _inputs(2, T, 3, torch.float64, seed=T)
    S_ref, S_wy = S0.clone(), S0.clone()
    y_ref, y_wy = wkv_chunk_ref(S_ref, *xs), wkv_chunk_wy(S_wy, *xs)
    assert check.max_rel_err(y_wy, y_ref) < 1e-12
    assert check.max_rel_err(S_wy, S_ref) < 1e-12
    # and in fp32, the precision the Triton kernel computes in
    S32 = S0.float()
    y32 = wkv_chunk_wy(S32, *(x.float() for x in xs))
    assert check.max_rel_err(y32, y_ref) < 1e-5 and check.max_rel_err(S32, S_ref) < 1e-5


def test_public_wrappers_on_cpu_are_the_reference():
    xs, S0 = _inputs(1, 5, 2, torch.float32, seed=3)
    S_a, S_b = S0.clone(), S0.clone()
    assert torch.equal(kernels.wkv_chunk(S_a, *xs), wkv_chunk_ref(S_b, *xs))
    assert torch.equal(S_a, S_b)
    step = [x[:, 0] for x in xs]
    assert torch.equal(kernels.wkv_step(S_a, *step), wkv_step_ref(S_b, *step))
    assert torch.equal(S_a, S_b)


_INTERPRETED = """
import torch
from server.model.kernels import check, wkv_triton as wt
f32, f16 = torch.float32, torch.float16
cases = [(wt.wkv_step_triton, "step", 2, 1, f32, True),
         (wt.wkv_seq_triton, "seq", 1, 5, f16, False),
         (wt.wkv_chunk_triton, "chunk", 1, 20, f32, False),
         (wt.wkv_chunk_triton, "chunk", 2, 17, f16, False)]
for fn, name, B, T, dt, step in cases:
    res = check.check_case(fn, name, B, T, 2, dt, dt, "cpu", step=step, seed=T)
    print(res)
    assert res.ok, res
"""


def test_triton_kernels_in_interpreter():
    pytest.importorskip("triton")
    out = run_interpreted(_INTERPRETED, timeout=240)
    assert out.stdout.count("ok=True") == 4


GPU_CASES = [(B, T, sd) for B in (1, 3, 64) for T in (1, 7, 64, 300)
             for sd in (torch.float32, torch.float16)]


@pytest.mark.gpu
@pytest.mark.parametrize("B,T,state_dtype", GPU_CASES)
@pytest.mark.parametrize("kind", ["seq", "chunk", "chunk32", "step"])
def test_triton_matches_reference_on_cuda(kind, B, T, state_dtype):
    if not (kernels.HAS_TRITON and torch.cuda.is_available()):
        pytest.skip("needs CUDA and Triton")
    if kind == "step" and T != 1:
        pytest.skip("the step takes one token")
    from server.model.kernels import wkv_triton as wt
    fn = {"seq": wt.wkv_seq_triton, "chunk": wt.wkv_chunk_triton, "step": wt.wkv_step_triton,
          "chunk32": functools.partial(wt.wkv_chunk_triton, chunk=32)}[kind]
    for in_dtype in (state_dtype, torch.bfloat16):
        res = check.check_case(fn, kind, B, T, 4, state_dtype, in_dtype, "cuda",
                               step=kind == "step", seed=B * 1000 + T)
        print(f"{res.name}: max rel err y {res.err_y:.2e}, S {res.err_s:.2e}")
        assert res.ok, res


@pytest.mark.gpu
@pytest.mark.parametrize("B,T", [(1, 300), (8, 70), (2, 5)])
def test_public_wrappers_on_cuda(B, T):
    """wkv_chunk picks the chunked form (B=1), the token loop (B=8, or T=5); all exact."""
    if not (kernels.HAS_TRITON and torch.cuda.is_available()):
        pytest.skip("needs CUDA and Triton")
    for state_dtype in (torch.float32, torch.float16):
        res = check.check_case(kernels.wkv_chunk, "wkv_chunk", B, T, 40, state_dtype,
                               torch.float16, "cuda", seed=T)
        print(f"{res.name}: max rel err y {res.err_y:.2e}, S {res.err_s:.2e}")
        assert res.ok, res
    res = check.check_case(kernels.wkv_step, "wkv_step", B, 1, 40, torch.float32,
                           torch.float32, "cuda", step=True)
    assert res.ok, res
