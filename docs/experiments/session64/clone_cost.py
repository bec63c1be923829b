"""Session 64 (CPU, this 2-core VM): what the copy-back thread's per-row clone costs. to_host
clones each finished row (10.5 MB of fp16 WKV state at 2.9B) out of the pinned staging buffer into
ordinary memory; here a 256 MiB pageable stand-in. Run: OMP_NUM_THREADS=2 uv run python
docs/experiments/session64/clone_cost.py (with THP_MEM_ALLOC_ENABLE=1 for PyTorch's huge pages)."""
import time, torch
buf = torch.empty(256 << 20, dtype=torch.uint8)
buf.fill_(1)
row = 10_485_760
views = [buf[i * row:(i + 1) * row].view(torch.float16) for i in range(24)]
keep = []
t = time.perf_counter()
for g in range(11):
    for v in views:
        keep.append(v.clone())
dt = time.perf_counter() - t
print(f"{len(keep)} clones of 10.5 MB: {dt*1e3:.0f} ms, {dt/len(keep)*1e3:.2f} ms each")
keep.clear()
t = time.perf_counter()
for g in range(11):
    for v in views:
        keep.append(v.clone())
dt = time.perf_counter() - t
print(f"again after freeing: {dt*1e3:.0f} ms, {dt/len(keep)*1e3:.2f} ms each")
