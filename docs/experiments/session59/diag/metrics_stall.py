"""Session 59: does a /metrics read stall the server while CAPTURE_LOCK is held (a graph
capture, or the copy-back's gather)? A tiny CPU server (in process, CUDA's memory counters
stood in for, as test/test_device_memory.py does); one thread holds the lock for 2 s, a
/metrics request starts, and 0.2 s later a request to another route (/nope, a 404) is timed.
Run from the tree to measure (its server/ and test/ are imported from the current folder):
    python docs/experiments/session59/diag/metrics_stall.py            # HEAD
    (cd /tmp/wt_a9f12ed && python /work/main/docs/.../metrics_stall.py)  # a9f12ed's code"""
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "test")]
import httpx  # noqa: E402
import torch  # noqa: E402

import server.api.app  # noqa: E402
import server.api.metrics  # noqa: E402
from openai_helpers import LiveServer  # noqa: E402
from server.config import Settings  # noqa: E402
from server.model import memory  # noqa: E402
from server.model.cuda_graph import CAPTURE_LOCK  # noqa: E402

torch.cuda.mem_get_info = lambda dev: (73 << 30, 80 << 30)
torch.cuda.memory_allocated = torch.cuda.max_memory_allocated = \
    torch.cuda.memory_reserved = lambda dev: 4 << 30
for module in (server.api.app, server.api.metrics):
    module.device_memory = lambda dev: memory.device_memory("cuda:0")
with tempfile.TemporaryDirectory() as tmp:
    settings = Settings(demo="tiny", device="cpu", task_db_path=str(Path(tmp) / "t.db"),
                        api_key=None, verbose=False)
    with LiveServer(settings) as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        c.get("/metrics")  # (a first reading, made with the lock free)
        t0 = time.perf_counter()
        c.get("/nope")
        alone = (time.perf_counter() - t0) * 1e3
        held = threading.Thread(target=lambda: (CAPTURE_LOCK.acquire(), time.sleep(2),
                                                CAPTURE_LOCK.release()))
        held.start()
        time.sleep(0.05)
        scrape = threading.Thread(target=lambda: httpx.get(srv.url + "/metrics", timeout=30))
        scrape.start()
        time.sleep(0.2)
        t0 = time.perf_counter()
        c.get("/nope")
        during = (time.perf_counter() - t0) * 1e3
        held.join()
        scrape.join()
print(f"GET /nope: {alone:.1f} ms alone, {during:.1f} ms while /metrics was read with "
      "CAPTURE_LOCK held")
