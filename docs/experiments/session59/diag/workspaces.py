"""Session 59: device memory cuBLAS workspaces hold after a model captures the graphs a server
captures (prefill buckets 16..1,024 tokens, decode batches 1..256), with one warm-up stream
(HEAD) or a new stream per capture (`old`: the code before, emulated by replacing
warmup_stream). Run: python3 docs/experiments/session59/diag/workspaces.py [old]"""
import sys

import torch

sys.path.insert(0, "test")
from model_cases import make_case  # noqa: E402
from server.model import cuda_graph  # noqa: E402
from server.model.forward import RWKV7  # noqa: E402

if sys.argv[1:] == ["old"]:
    cuda_graph.warmup_stream = lambda dev: torch.cuda.Stream(dev)
case = make_case("c512", with_reference=False)
model = RWKV7(case.sd, case.cfg, device="cuda")
lengths = sorted({model._graphed_prefill.bucket(n) for n in range(1, 1025)})
for n in lengths:
    model.prefill([[t % case.cfg.vocab_size for t in range(1, n + 1)]], model.new_state(1))
batches = [2 ** i for i in range(9)]
for b in batches:
    model.decode(torch.arange(b, device="cuda"), model.new_state(b))
torch.cuda.synchronize()
a = torch.cuda.memory_allocated()
torch._C._cuda_clearCublasWorkspaces()
w = a - torch.cuda.memory_allocated()
print(f"{sys.argv[1:] or ['head']}: {len(model._graphed_prefill.graphs)} prefill graphs, "
      f"{len(model._graphed.graphs)} decode graphs; allocated {a / 2**20:.0f} MiB, of it "
      f"cuBLAS workspaces {w / 2**20:.0f} MiB")
