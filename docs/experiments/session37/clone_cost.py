"""What a request from a template paid before d755395: a copy of the template's state at the
2.9B shape (32 layers, 40 heads of 64 x 64, fp32 WKV; C = 2560), on the CPU, one thread.

    OMP_NUM_THREADS=1 PYTHONPATH=. uv run python docs/experiments/session37/clone_cost.py
"""
import time

import torch

from server.model.state import State

torch.set_num_threads(1)
st = State(torch.randn(32, 2, 1, 2560), torch.randn(32, 1, 40, 64, 64))
for i in range(5):
    t = time.perf_counter()
    st.clone()
    print(f"State.clone at the 2.9B shape: {(time.perf_counter() - t) * 1e3:.1f} ms")
