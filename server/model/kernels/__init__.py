"""WKV-7 recurrence entry points: Triton on CUDA (when Triton imports), plain torch otherwise.

Both update S in place and return y in r's dtype; math is fp32 whatever the storage dtypes.
    wkv_step(S[B, H, N, N] fp32|fp16, r, w, k, v, kappa, a: [B, H, N])    -> y [B, H, N]
    wkv_chunk(S[B, H, N, N] fp32|fp16, r, w, k, v, kappa, a: [B, T, H, N]) -> y [B, T, H, N]
w is the decay in (0, 1) (not its log). Semantics: `wkv_torch.py`.
"""

from torch import Tensor

from .wkv_torch import wkv_chunk_ref, wkv_step_ref

try:
    from .wkv_triton import prefer_chunked, wkv_chunk_triton, wkv_seq_triton, wkv_step_triton
    HAS_TRITON = True
except ImportError:  # CPU-only installs
    HAS_TRITON = False

__all__ = ["HAS_TRITON", "wkv_chunk", "wkv_step"]


def _use_triton(S: Tensor) -> bool:
    return HAS_TRITON and S.is_cuda


def wkv_step(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
             kappa: Tensor, a: Tensor) -> Tensor:
    """One token for B sequences: S [B, H, N, N] (in place), r..a [B, H, N] -> y [B, H, N]."""
    if _use_triton(S):
        return wkv_step_triton(S, r, w, k, v, kappa, a)
    return wkv_step_ref(S, r, w, k, v, kappa, a)


def wkv_chunk(S: Tensor, r: Tensor, w: Tensor, k: Tensor, v: Tensor,
              kappa: Tensor, a: Tensor, split_invariant: bool = False,
              mid: Tensor | None = None, S_mid: Tensor | None = None) -> Tensor:
    """T tokens for B sequences of equal length: S [B, H, N, N] (in place),
    r..a [B, T, H, N] -> y [B, T, H, N]. ``split_invariant``: a sequence gets the same bits
    however it is cut into calls at multiples of the chunk (wkv_triton.CHUNK): the chunked form
    at every length where it applies, not only from ``prefer_chunked``'s 64 tokens (the token
    loop rounds differently), and a half-precision S rounded at every chunk's end.
    ``mid`` (one sequence: a [K] integer tensor, K <= 2, on S's device, read there: a CUDA
    graph's input) and ``S_mid`` ([K, H, N, N]): row k gets the state after the first
    ``mid[k]`` tokens, as a call ending there leaves S (the chunked form: only where a chunk
    ends); untouched where none does."""
    if not _use_triton(S):
        return wkv_chunk_ref(S, r, w, k, v, kappa, a, mid, S_mid)
    B, T, H, _ = r.shape
    if prefer_chunked(B, T, H, r.device, split_invariant):
        return wkv_chunk_triton(S, r, w, k, v, kappa, a, round_chunks=split_invariant,
                                mid=mid, S_mid=S_mid)
    return wkv_seq_triton(S, r, w, k, v, kappa, a, mid=mid, S_mid=S_mid)
