"""Which forms of the prefill's matrix products give a row the same bits whatever the row count
of its pass, on this GPU (``RWKV7.split_invariant``; fused.py runs them).

cuBLAS picks its kernel by shape, and for few rows it may split a long K over the GPU and add
the parts in another order: a row's bits then depend on how many rows the pass has, and a prompt
resumed from the prefix cache would not end in the bits of one computed in one go. Measured on
the H200 (docs/performance.md, sessions 19-20): the FFN value (K = 4·C) split at 16-192 rows of
2.9B's shape; the output product (K = C) split at 16-80 and 208 rows of 7.2B's (C = 4,096), not
at 2.9B's; the r/k/v, FFN key and LoRA products did not, at either shape.

The two products added into the fp32 residual (output, FFN value) can run over slices of K: one
batched product of fp32 parts (a batched product was never split), added in order
(``FusedBlocks._add_sliced``). ``choose_slices`` times nothing: it computes each product at
every row count a single-sequence pass can have (multiples of 16 up to the model's prefill
chunk: the CUDA graphs' buckets and the prefiller's cuts) and compares each result with the
same rows of the largest, for 1, 2, 4, ... slices until one form keeps every bit; it checks the
other products as they run. Run once, when the model is built.

The plain forward (forward.py: the CPU, or CUDA without the fused path) has no such choice:
``plain_products_invariant`` checks its products as they run, at every multiple of the
model's ``prefill_align`` up to its prefill chunk. A CPU's BLAS may also split a long K over
its threads for few rows, depending on the machine and its thread count."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

SLICE_COUNTS = (1, 2, 4, 8, 16)  # tried in turn: the fewest slices that keep the bits
ROW_STEP = 16  # row counts checked: multiples of this (the WKV chunk on CUDA)


def same_rows(fn: Callable[[Tensor], Tensor], x: Tensor, step: int = ROW_STEP) -> bool:
    """Whether ``fn`` (rows in -> rows out, along the second-to-last axis) gives the first r
    rows of ``x`` the bits it gives them within all of ``x``, for every multiple r of ``step``."""
    ref = fn(x)
    n = x.shape[-2]
    return all(torch.equal(fn(x[..., :r, :].contiguous()), ref[..., :r, :])
               for r in range(step, n, step))


def choose_slices(blocks) -> dict[str, int] | None:
    """{"output": s, "ffn_value": s}: the fewest slices of K (``SLICE_COUNTS``) that keep each
    residual product's rows exact at every row count; None when a product has no such form (or
    another product changes a row's bits with the row count): no split invariance here.
    ``blocks``: a ``FusedBlocks`` with fp32-output products (its layer 0 is checked; the other
    layers have the same shapes)."""
    m = blocks.model
    lw, st = m.layers[0], blocks.stacks[0]
    R = m.prefill_chunk - m.prefill_chunk % ROW_STEP
    gen = torch.Generator(device=m.device).manual_seed(0)

    def rand(*shape) -> Tensor:
        return (torch.randn(*shape, device=m.device, generator=gen) * 0.5).to(m.dtype)

    C = lw.wo.shape[0]
    others = [  # as fused.py runs them
        (lambda t: torch.bmm(t, st.rkv.transpose(1, 2)), rand(3, R, C)),
        (lambda t: torch.nn.functional.linear(t, lw.ffn_key), rand(R, C)),
        (lambda t: blocks._lora(t, st), rand(6, R, C)),  # (the mixes: v, w, a, g are 2..5)
    ]
    if not all(same_rows(fn, x) for fn, x in others):
        return None
    slices = {}
    for name, w in (("output", lw.wo), ("ffn_value", lw.ffn_value)):
        x = rand(R, w.shape[1])

        def product(t: Tensor, s: int) -> Tensor:
            out = torch.zeros(t.shape[0], w.shape[0], device=t.device)
            blocks._add_sliced(out, t, w, s)
            return out

        found = next((s for s in SLICE_COUNTS
                      if w.shape[1] % s == 0 and same_rows(lambda t: product(t, s), x)), None)
        if found is None:
            return None
        slices[name] = found
    return slices


def plain_products_invariant(model) -> bool:
    """Whether every matrix product of ``model``'s plain forward (``F.linear`` of the r/k/v,
    output and FFN weights, ``x @ W`` of the LoRA stages) gives a row the same bits at every
    row count a pass can have (multiples of ``model.prefill_align`` up to its prefill chunk).
    Layer 1 is checked (layer 0 has no value LoRA; the others have its shapes)."""
    lw = model.layers[min(1, len(model.layers) - 1)]
    step = model.prefill_align
    rows = model.prefill_chunk - model.prefill_chunk % step
    gen = torch.Generator(device=model.device).manual_seed(0)
    forms = [(lambda t, w=w: F.linear(t, w), w.shape[1])
             for w in (lw.wr, lw.wk, lw.wv, lw.wo, lw.ffn_key, lw.ffn_value)]
    forms += [(lambda t, w=w: t @ w, w.shape[0])
              for w in (lw.w1, lw.w2, lw.a1, lw.a2, lw.g1, lw.g2, lw.v1, lw.v2) if w is not None]
    for fn, k in forms:
        x = (torch.randn(rows, k, device=model.device, generator=gen) * 0.5).to(model.dtype)
        if not same_rows(fn, x, step):
            return False
    return True
