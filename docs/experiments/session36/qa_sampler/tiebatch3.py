import sys, os
sys.path.insert(0, "/work/main")
os.environ.setdefault("RWKV_TASK_DB_PATH", "/tmp/qa_samp/tasks.db")
import torch
from server import RWKV070ModelLoader
from server.model.sampler import BatchSampler, SamplingBatch
for dt in ("fp32", "bf16"):
    ld = RWKV070ModelLoader("/tmp/qa_samp/m.pth", device="cpu", dtype=dt)
    st = ld.model.new_state(1)
    with torch.no_grad():
        lg = ld.model.prefill([ld.encode("User: hello there\n\nAssistant:")], st)[0].float()
    V = lg.numel(); s = BatchSampler(V)
    def draw(rows, seeds):
        b = SamplingBatch.empty(len(rows) * len(seeds), V)
        out = []
        n = len(rows)
        for j, sd in enumerate(seeds):
            for i, (T, k, p) in enumerate(rows):
                r = j * n + i
                b.temperature[r] = T; b.top_k[r] = k; b.top_p[r] = p; b.seed[r] = sd if i == 0 else 99
        tok = s.sample(lg[None].expand(b.batch_size, V).contiguous(), b)
        return tok[::n].tolist()
    seeds = list(range(300))
    for probe, nb in [((1.0, 50, 1.0), (1.0, 500, 1.0)), ((1.0, 0, 0.9), (1.0, 0, 0.5)), ((1.0, 2000, 0.95), (1.0, 0, 0.5))]:
        alone = [draw([probe], [sd])[0] for sd in seeds[:100]]
        tog = draw([probe, nb], seeds[:100])
        print(dt, "probe", probe, "alone(1 row) vs 100 probes interleaved with", nb,
              "changed", sum(a != t for a, t in zip(alone, tog)), "/ 100")
