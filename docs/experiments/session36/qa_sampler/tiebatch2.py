import sys, os
sys.path.insert(0, "/work/main")
os.environ.setdefault("RWKV_TASK_DB_PATH", "/tmp/qa_samp/tasks.db")
import torch
from server import RWKV070ModelLoader
from server.model.sampler import BatchSampler, SamplingBatch
ld = RWKV070ModelLoader("/tmp/qa_samp/m.pth", device="cpu", dtype="bf16")
st = ld.model.new_state(1)
with torch.no_grad():
    lg = ld.model.prefill([ld.encode("User: hello there\n\nAssistant:")], st)[0].float()
V = lg.numel(); s = BatchSampler(V)
def draw(rows, seeds):
    """rows: list of (T, k, p) ; row 0 is the probe row with seeds; returns row-0 tokens"""
    out = []
    for sd in seeds:
        b = SamplingBatch.empty(len(rows), V)
        for i, (T, k, p) in enumerate(rows):
            b.temperature[i] = T; b.top_k[i] = k; b.top_p[i] = p
        b.seed[0] = sd; b.seed[1:] = 99
        out.append(int(s.sample(lg[None].expand(len(rows), V).contiguous(), b)[0]))
    return out
seeds = range(400)
for probe in [(1.0, 50, 1.0), (1.0, 20, 0.9), (1.0, 1, 1.0)]:
    alone = draw([probe], seeds)
    for nb in [(1.0, 500, 1.0), (1.0, 2, 1.0), (1.0, 64, 1.0)]:
        tog = draw([probe, nb], seeds)
        diff = [i for i in seeds if alone[i] != tog[i]]
        print("probe", probe, "neighbour", nb, "changed", len(diff), "/", len(seeds),
              "e.g. seed", diff[:1], [(alone[i], tog[i], float(lg[alone[i]]), float(lg[tog[i]])) for i in diff[:1]])
print("greedy token", int(lg.argmax()), "top_k=1 alone token", draw([(1.0, 1, 1.0)], [0])[0])
