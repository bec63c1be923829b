"""The loader's encode in the served path (http_stages' in-process server and chat), split into
its parts, with the comparison loop as it was before cfb06f3 (every recent text compared):
bytes, tail bytes encoded, recent texts | compare | numpy | tolist | encode tail | append (us).

    PYTHONPATH=. python docs/experiments/session40/cpu/encode_split_old_loop.py
"""
import sys, time
import numpy as np
from array import array
import server.bench.http_stages as hs
from server.model import tokenizer as tk
log = []
def encode(self, text):
    T = [time.perf_counter()]
    data = text.encode("utf-8", errors="surrogatepass")
    with self._lock:
        recent = list(self._recent)
    shared, old = 0, None
    for seen, ids in recent:
        m = tk.common_prefix_length(data, seen)
        if m > shared:
            shared, old = m, ids
    T.append(time.perf_counter())
    keep, start = 0, 0
    if old is not None and shared > self.tokenizer.max_len + 1:
        lengths = self._lengths[np.frombuffer(old, dtype=np.uint32)]
        ends = np.cumsum(lengths)
        keep = int(np.searchsorted(ends - lengths, shared - self.tokenizer.max_len - 1, side="right"))
        start = int(ends[keep - 1]) if keep else 0
    T.append(time.perf_counter())
    head = old[:keep].tolist() if keep else []
    T.append(time.perf_counter())
    tail = self.tokenizer.encode_bytes(data, start)
    T.append(time.perf_counter())
    out = head + tail
    with self._lock:
        self._recent.append((data, array("I", out)))
    T.append(time.perf_counter())
    log.append((len(data), len(data) - start, len(recent)) + tuple((b - a) * 1e6 for a, b in zip(T, T[1:])))
    return out
tk.ReusingEncoder.encode = encode
hs.main(sys.argv[1:])
print("bytes, tail bytes, recents | compare | numpy | tolist | encode tail | append")
for x in log[-16:]: print("%d %d %d | %.0f | %.0f | %.0f | %.0f | %.0f" % x)
