import sys; sys.path.insert(0, "/tmp/fz_cache/fuzz")
from common import *
L = loader(); M = L.model
g = torch.Generator().manual_seed(0)
for rows in (2, 3, 4, 8, 16):
    x = torch.randn(rows, M.cfg.n_embd, generator=g)
    full = M._logits(x); one = torch.cat([M._logits(x[i:i+1]) for i in range(rows)])
    print(rows, torch.equal(full, one), (full - one).abs().max().item())
