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


@triton.jit(do_not_specialize=["C", "V"])
def _rows_kernel(table_ptr, idx_ptr, out_ptr, C, V, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < C
    row = tl.load(idx_ptr + r).to(tl.int64) + tl.zeros([BLOCK], dtype=tl.int64)  # (a block:
    # a scalar condition in the mask is refused by Triton's CPU interpreter)
    v = tl.load(table_ptr + row * C + cols, mask=m & (row >= 0) & (row < V), other=0.0)
    tl.store(out_ptr + r * C + cols, v.to(tl.float32), mask=m)


def rows_into(table: Tensor, idx: Tensor, out: Tensor) -> Tensor:
    """out[r] = table[idx[r]] as fp32. table: [V, C] (pinned host memory or on idx's device),
    idx: [R] integer ids on the device, out: [R, C] fp32 there, contiguous. An id outside
    0..V-1 gives a row of zeros: the kernel cannot raise, and an unchecked id would otherwise
    read whatever host memory lies there (PyTorch's pinned block is rounded up to a power of
    two: past the table, then other allocations). Callers check ids against the vocabulary
    first (a helper's review, session 61: the next-turn warm did not)."""
    R, C = out.shape
    if R:
        _rows_kernel[(R, triton.cdiv(C, _BLOCK))](table, idx, out, C, table.shape[0],
                                                   BLOCK=_BLOCK)
    return out
