"""Do the fused path's prefill products keep a row's bits at the row counts of a batched pass?

The load-time check (row_invariance.choose_slices) covers multiples of 16 up to the prefill
chunk (1,024 on CUDA); a batched split-invariant pass that keeps its prompts' bits
(RWKV7.pass_keeps_bits: up to #SMs / H prompts) runs products of up to that many chunks' rows:
3 x 1,024 at 2.9B on the H200, 2 x 1,024 at 7.2B. This runs choose_slices again with its row
limit raised to ROWS and reports whether the same slices keep every row's bits there.

    python3 docs/experiments/session32/rows_check.py 2.9b 4096
"""

import sys
import time

import torch

from server.bench.common import build_model
from server.model import row_invariance

preset, rows = sys.argv[1], int(sys.argv[2])
model = build_model(preset, "cuda", "fp16")
blocks = model._fused
t0 = time.perf_counter()
chosen = dict(blocks.slices or {})
print(f"{preset}: chosen at load (up to {row_invariance.checked_rows(model)} rows): {chosen} "
      f"(split_invariant={model.split_invariant})")
row_invariance.checked_rows = lambda m: rows  # the check's row limit raised
again = row_invariance.choose_slices(blocks)
print(f"{preset}: up to {rows} rows: {again} ({time.perf_counter() - t0:.1f} s); "
      f"{'same' if again == chosen else 'DIFFERENT'}")
