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

The plain forward (forward.py: the CPU, or CUDA without the fused path) gets the same choice
for each of its products (``plain_slices``), at every multiple of the model's
``prefill_align`` up to its prefill chunk: a CPU's BLAS may change a row's bits with the row
count too (measured on the 2-core CPU machine: products with K = 1,024 at 32-128 of 256 rows;
over two slices of 512 they kept their bits, in the same time)."""

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


def checked_rows(model) -> int:
    """The most rows a checked product has (the model's prefill chunk, cut to a multiple of its
    ``prefill_align``): a batched pass's products run in parts of at most this many rows."""
    return model.prefill_chunk - model.prefill_chunk % model.prefill_align


def _inputs(model):
    """(step, rand): the row counts to check are the multiples of ``step`` (the model's
    ``prefill_align``: where the prefiller cuts) below ``rows`` (its prefill chunk, cut to a
    multiple), and ``rand(*lead, k)`` draws seeded inputs [*lead, rows, k] in its dtype."""
    step, rows = model.prefill_align, checked_rows(model)
    gen = torch.Generator(device=model.device).manual_seed(0)

    def rand(*shape) -> Tensor:
        shape = (*shape[:-1], rows, shape[-1])
        return (torch.randn(*shape, device=model.device, generator=gen) * 0.5).to(model.dtype)

    return step, rand


def _fewest_slices(fn: Callable[[Tensor, int], Tensor], x: Tensor, counts, step: int
                   ) -> int | None:
    """The fewest slices s of ``counts`` (dividing x's K) over which ``fn(rows, s)`` keeps
    every row of ``x`` (``same_rows``); None: none does."""
    k = x.shape[-1]
    return next((s for s in counts if k % s == 0
                 and same_rows(lambda t, s=s: fn(t, s), x, step)), None)


def choose_slices(blocks) -> dict[str, int] | None:
    """{"output": s, "ffn_value": s}: the fewest slices of K (``SLICE_COUNTS``) that keep each
    residual product's rows exact at every row count; None when a product has no such form (or
    another product changes a row's bits with the row count): no split invariance here.
    ``blocks``: a ``FusedBlocks`` with fp32-output products (its layer 0 is checked; the other
    layers have the same shapes)."""
    m = blocks.model
    lw, st = m.layers[0], blocks.stacks[0]
    step, rand = _inputs(m)
    C = lw.wo.shape[0]
    others = [  # as fused.py runs them
        (lambda t: torch.bmm(t, st.rkv.transpose(1, 2)), rand(3, C)),
        (lambda t: F.linear(t, lw.ffn_key), rand(C)),
        (lambda t: blocks._lora(t, st), rand(6, C)),  # (the mixes: v, w, a, g are 2..5)
    ]
    if not all(same_rows(fn, x, step) for fn, x in others):
        return None
    slices = {}
    for name, w in (("output", lw.wo), ("ffn_value", lw.ffn_value)):
        def product(t: Tensor, s: int, w=w) -> Tensor:
            out = torch.zeros(t.shape[0], w.shape[0], device=t.device)
            blocks._add_sliced(out, t, w, s)
            return out

        found = _fewest_slices(product, rand(w.shape[1]), SLICE_COUNTS, step)
        if found is None:
            return None
        slices[name] = found
    return slices


LINEAR = ("wr", "wk", "wv", "wo", "ffn_key", "ffn_value")  # F.linear(x, W): W is [N, K]
LORA = ("w1", "w2", "a1", "a2", "g1", "g2", "v1", "v2")  # x @ W: W is [K, N]


def product(x: Tensor, w: Tensor, linear: bool, slices: int = 1) -> Tensor:
    """The plain forward's product ``F.linear(x, w)`` (``linear``) or ``x @ w``, over
    ``slices`` slices of K: their products (one batched product) added in order in fp32, then
    rounded to x's dtype (1: the product itself)."""
    if slices == 1:
        return F.linear(x, w) if linear else x @ w
    k = x.shape[-1]
    n = k // slices
    ws = (w.reshape(w.shape[0], slices, n).permute(1, 2, 0) if linear
          else w.reshape(slices, n, -1))  # (a copy only for a non-contiguous view)
    parts = torch.bmm(x.reshape(-1, slices, n).transpose(0, 1), ws)  # [slices, R, N]
    out = parts[0].float()
    for part in parts[1:]:
        out = out + part.float()
    return out.to(x.dtype).view(*x.shape[:-1], -1)


def plain_slices(model) -> dict[str, int] | None:
    """{weight name: s}: for each product of ``model``'s plain forward (``LINEAR``, ``LORA``),
    the fewest slices of K (``SLICE_COUNTS``) over which ``product`` gives a row the same bits
    at every row count a pass can have (multiples of ``model.prefill_align`` up to its prefill
    chunk); None when one has no such form. Layer 1 is checked (layer 0 has no value LoRA; the
    others have its shapes). Slices only for fp32 weights: half-precision parts are rounded
    before they are added, and on the CPU took longer (0.1B in bf16 on the 2-core machine:
    1,211-1,231 tok/s prefill over slices against 1,959-1,984 whole, logits 1.35e-2 from fp32
    against 1.12e-2), so there only the whole product is tried."""
    lw = model.layers[min(1, len(model.layers) - 1)]
    step, rand = _inputs(model)
    counts = SLICE_COUNTS if model.dtype == torch.float32 else (1,)
    chosen = {}
    for name in LINEAR + LORA:
        w = getattr(lw, name)
        if w is None:
            continue
        linear = name in LINEAR
        x = rand(w.shape[1] if linear else w.shape[0])
        found = _fewest_slices(lambda t, s, w=w, linear=linear: product(t, w, linear, s), x,
                               counts, step)
        if found is None:
            return None
        chosen[name] = found
    return chosen
