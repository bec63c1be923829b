"""Host (scheduler-thread) time of LogprobRecorder.record + result for a pulse, CPU tensors
(a review helper's probe, session 44). Run from the repository root."""
import sys, time; sys.path.insert(0, ".")
import numpy as np, torch
torch.set_num_threads(1)
from server.scheduler.logprobs import LogprobRecorder
V, steps = 65536, 32
for R, top in [(1, 20), (8, 20), (64, 20), (64, 0), (256, 5)]:
    cap = max(R, 8)
    rec = LogprobRecorder({s: top for s in range(R)}, torch.device("cpu"))
    logits = torch.randn(cap, V); tok = torch.randint(0, V, (cap,))
    t0 = time.perf_counter()
    for s in range(steps): rec.record(logits, tok)
    t1 = time.perf_counter()
    res = rec.result(np.ones((cap, steps), dtype=bool))
    t2 = time.perf_counter()
    print(f"R={R:3} top={top:2}: record x{steps} {1e3*(t1-t0):7.1f} ms (compute), result() {1e3*(t2-t1):6.1f} ms (host python)")
