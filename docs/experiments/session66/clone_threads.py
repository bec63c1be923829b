"""Session 66: do the copy-back's row clones (split_rows: 10.5 MB of fp16 WKV state a 2.9B row,
out of a 256 MiB staging buffer into new memory) go faster on more threads? PyTorch's own
intra-op threads (torch.set_num_threads; the process's default first) against a pool of Python
threads cloning whole rows. Each variant clones 264 rows into fresh memory (first-touch page
faults, as served: tasks keep their rows), twice in turn. Meant for the GPU machine's host (16
cores): on this 2-core VM the figures swing 1-30 ms a row between runs (its memory's first
touch). Run: python3 docs/experiments/session66/clone_threads.py"""
import time
from concurrent.futures import ThreadPoolExecutor

import torch

buf = torch.empty(256 << 20, dtype=torch.uint8)
buf.fill_(1)
row = 10_485_760
views = [buf[i * row:(i + 1) * row].view(torch.float16) for i in range(24)] * 11
default = torch.get_num_threads()


def run(label, fn):
    t = time.perf_counter()
    keep = fn()
    dt = time.perf_counter() - t
    print(f"{label}: {len(keep)} clones {dt * 1e3:.0f} ms, {dt / len(keep) * 1e3:.2f} ms each",
          flush=True)
    del keep


for rnd in range(2):
    for n in (default, 1, 4):
        torch.set_num_threads(n)
        run(f"torch threads {n}", lambda: [v.clone() for v in views])
    torch.set_num_threads(1)
    for k in (4, 8):
        with ThreadPoolExecutor(k) as pool:
            run(f"pool of {k}, torch threads 1", lambda: list(pool.map(torch.clone, views)))
