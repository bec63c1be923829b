"""Random inputs and error figures for checking WKV kernels against the fp64 reference.

Shared by the tests (`test/test_wkv_kernels.py`) and the GPU script (`python -m server.bench.wkv
--check`), so both check the same function on the same kind of data.
"""

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from .wkv_torch import wkv_chunk_ref

N = 64
# Tolerance on max|x - ref| / max|ref| by the dtype results are stored in.
TOL = {torch.float32: 1e-4, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def random_inputs(B: int, T: int, H: int, dtype: torch.dtype, device, seed: int = 0
                  ) -> tuple[Tensor, ...]:
    """(r, w, k, v, kappa, a), each [B, T, H, N]: realistic magnitudes (w in (0.3, 1),
    kappa unit-norm per head, a in (0, 1), r/k/v ~ N(0, 0.25)). Drawn on `device`."""
    g = torch.Generator(device).manual_seed(seed)

    def rand(normal: bool):
        f = torch.randn if normal else torch.rand
        return f(B, T, H, N, generator=g, device=device)

    r, k, v = rand(True) * 0.5, rand(True) * 0.5, rand(True) * 0.5
    w = 0.3 + 0.7 * rand(False)
    kappa = rand(True)
    kappa = kappa / kappa.norm(dim=-1, keepdim=True)
    a = rand(False)
    return tuple(x.to(dtype) for x in (r, w, k, v, kappa, a))


def random_state(B: int, H: int, dtype: torch.dtype, device, seed: int = 0) -> Tensor:
    """S: [B, H, N, N], entries ~ N(0, 0.25), drawn on `device`."""
    g = torch.Generator(device).manual_seed(seed + 1)
    return (torch.randn(B, H, N, N, generator=g, device=device) * 0.5).to(dtype)


def max_rel_err(x: Tensor, ref: Tensor) -> float:
    """max|x - ref| / max|ref| in fp64 (NaN if x has NaN, so comparisons with it fail)."""
    x, ref = x.double(), ref.double()
    return ((x - ref).abs().max() / ref.abs().max()).item()


@dataclass
class CaseResult:
    name: str
    err_y: float
    err_s: float
    ok: bool


def check_case(fn: Callable, name: str, B: int, T: int, H: int, state_dtype: torch.dtype,
               in_dtype: torch.dtype, device, step: bool = False, seed: int = 0) -> CaseResult:
    """Run fn(S, r, w, k, v, kappa, a) on random data ([B, H, N] vectors if step) and compare
    y and the new S with the fp64 reference fed the same (already rounded) inputs."""
    xs = random_inputs(B, T, H, in_dtype, device, seed)
    S = random_state(B, H, state_dtype, device, seed)
    S64 = S.double()
    y64 = wkv_chunk_ref(S64, *(x.double() for x in xs))
    y = fn(S, *(x[:, 0] for x in xs)) if step else fn(S, *xs)
    y = y.unsqueeze(1) if step else y
    err_y, err_s = max_rel_err(y, y64), max_rel_err(S, S64)
    ok = (y.shape == y64.shape and y.dtype == in_dtype and S.dtype == state_dtype
          and err_y < TOL[in_dtype] and err_s < TOL[state_dtype])
    return CaseResult(f"{name} B={B} T={T} H={H} S={str(state_dtype)[6:]} x={str(in_dtype)[6:]}",
                      err_y, err_s, ok)
