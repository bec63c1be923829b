"""Where a CPU decode step of the 0.1B preset goes (fp32, T threads, default 1): ms a step and
torch.profiler's operators by self time. usage: T=1 uv run python docs/experiments/session42/cpu_profile/decode_ops.py"""
import os, sys, time, tempfile
import torch
sys.path.insert(0, os.getcwd())
from server.model.random import make_random_state_dict, PRESETS
from server.model.loader import RWKV070ModelLoader
torch.set_num_threads(int(os.environ.get("T", "1")))
sd = make_random_state_dict(*PRESETS["0.1b"])
p = os.path.join(tempfile.mkdtemp(), "m.pth"); torch.save(sd, p)
ld = RWKV070ModelLoader(p, device="cpu")
m = ld.model
print("fused", getattr(m, "fused", None) is not None, type(getattr(m, "fused", None)))
st = ld.gen_state(1)
tok = torch.tensor([123])
for _ in range(3): m.decode(tok, st)
t = time.perf_counter(); N = 10
for _ in range(N): m.decode(tok, st)
print("ms/step", (time.perf_counter() - t) / N * 1e3)
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(3): m.decode(tok, st)
ev = prof.key_averages()
n = sum(e.count for e in ev if not e.key.startswith("aten::") or True)
print("ops per step (top-level aten):", sum(e.count for e in ev if e.key.startswith("aten::")) / 3)
print(ev.table(sort_by="self_cpu_time_total", row_limit=25))
