import sys; sys.path.insert(0, "/work/main")
import torch
from server.model.sampler import BatchSampler, SamplingBatch
V = 5
for p in (0.2, 0.4, 0.6, 0.8, 0.5, 0.25):
    b = SamplingBatch.empty(2000, V); b.top_p.fill_(p); b.seed.copy_(torch.arange(2000))
    t = BatchSampler(V).sample(torch.zeros(2000, V), b)
    print(f"5 equal logits, top_p={p}: distinct tokens kept = {len(set(t.tolist()))} (doc rule: {max(1, -(-round(p*5*1000)//1000))})")
