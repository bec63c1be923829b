"""Top-50 of [B, 65,536] fp32 on the CPU: torch.topk against sampler._topk_low_ties (session 36).

    OMP_NUM_THREADS=2 uv run python docs/experiments/session36/topk_ties.py
"""
import time, torch, sys
sys.path.insert(0, ".")
from server.model.sampler import _topk_low_ties
torch.manual_seed(0)
for B in (1, 32, 256):
    x = torch.randn(B, 65536)
    k = torch.full((B,), 50)
    for name, f in (("topk values", lambda: torch.topk(x, 50, dim=1)),
                    ("low ties", lambda: _topk_low_ties(x, 50, k))):
        f(); t = time.perf_counter(); n = 20
        for _ in range(n): f()
        print(B, name, f"{(time.perf_counter()-t)/n*1e3:.2f} ms")
