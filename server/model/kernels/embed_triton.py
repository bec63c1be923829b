"""The embedding lookup from a table in pinned host memory (CUDA): each program copies one
block of one row, read by the device over the bus (a pinned allocation is mapped into the
device's address space under unified addressing, so its pointer is valid in a kernel) and
written to device memory as fp32, the residual stream's dtype. A decode step reads a row a
slot (5 KB at C = 2,560), a pass a row a token: small against the step's weights, and the
table (V x C, 320 MiB at 2.9B) no longer takes device memory."""

import triton
import triton.language as tl
from torch import Tensor

_BLOCK = 512


@triton.jit(do_not_specialize=["C"])
def _rows_kernel(table_ptr, idx_ptr, out_ptr, C, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < C
    row = tl.load(idx_ptr + r).to(tl.int64)
    v = tl.load(table_ptr + row * C + cols, mask=m)
    tl.store(out_ptr + r * C + cols, v.to(tl.float32), mask=m)


def rows_into(table: Tensor, idx: Tensor, out: Tensor) -> Tensor:
    """out[r] = table[idx[r]] as fp32. table: [V, C] (pinned host memory or on idx's device),
    idx: [R] integer ids on the device, out: [R, C] fp32 there, contiguous."""
    R, C = out.shape
    if R:
        _rows_kernel[(R, triton.cdiv(C, _BLOCK))](table, idx, out, C, BLOCK=_BLOCK)
    return out
