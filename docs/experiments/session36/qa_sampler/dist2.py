import sys
sys.path.insert(0, "/tmp/qa_samp"); sys.path.insert(0, "/work/main")
import numpy as np, torch
from ref import ref_dist, chi2_test
import dist
from server.model.sampler import BatchSampler, SamplingBatch

torch.manual_seed(1)
for V, scale in [(64, 0.5), (3000, 1.0)]:
    dist.V = V
    lg = (torch.randn(V) * scale).float()
    settings = [(1.0, 0, 0.5), (0.8, 20, 0.9), (1.3, 50, 0.3), (1.0, 0, 0.9), (0.7, 10, 0.6),
                (1.0, 1000, 0.7), (1.0, 2000, 0.8), (1.0, 1024, 0.95), (1.0, 1025, 0.95),
                (1.0, 2500, 1.0), (2.0, 0, 0.5), (1.0, V + 1, 0.5), (0.5, 3, 1.0)]
    for T, k, p in settings:
        dist.check(f"V={V} scale={scale}", lg, T, k, p, N=20000 if V == 64 else 12000)
