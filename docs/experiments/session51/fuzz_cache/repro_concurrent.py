"""Minimal: a request that never touches the prefix cache (Z) decodes other bits when the
cache is on, because another request (Y) that hits the cache starts decoding sooner and so
shares Z's decode batches (CPU decode rounds by the batch's row count: rowinv.py).
Same scheduler settings, same requests, same arrival steps; only RWKV_STATE_CACHE differs."""
import sys; sys.path.insert(0, "/tmp/fz51")
import torch; torch.set_num_threads(1)
from server.model.loader import RWKV070ModelLoader
from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task
L = RWKV070ModelLoader("/tmp/fz51_fuzz/tiny.pth", device="cpu")
P = L.encode("System: " + "You are a careful assistant; answer briefly and kindly. " * 12 + "\n\nUser: hi\n\nAssistant:")
Q = L.encode("User: tell me a story about a cat\n\nAssistant:")

def run(cached):
    s = DynamicScheduler(L, max_batch_size=4, buffer_size=1, prefill_chunk=32,
                         prefix_cache=PrefixCache(64 << 20) if cached else None)
    def task(p, mt):
        t = Task(list(p), max_tokens=mt, temperature=0.0); t.cache_origin = ""; t.logprobs = 0
        s.add_task(t); return t
    x = task(P, 1)
    while s.has_work: s.step()
    z = task(Q, 40)           # Z: never cached, decodes 40 tokens
    for _ in range(3): s.step()
    y = task(P + L.encode(" more"), 20)  # Y: P is cached in the cache-on run
    while s.has_work: s.step()
    return x, y, z

a, b = run(True), run(False)
for name, ta, tb in zip("XYZ", a, b):
    n = next((i for i, (p, q) in enumerate(zip(ta.output_logprobs, tb.output_logprobs)) if p != q), None)
    print(f"{name}: tokens equal {ta.output == tb.output}  logprobs equal {ta.output_logprobs == tb.output_logprobs}"
          + (f"  first differing logprob at output {n}: on {ta.output_logprobs[n][0]!r} off {tb.output_logprobs[n][0]!r}" if n is not None else ""))
