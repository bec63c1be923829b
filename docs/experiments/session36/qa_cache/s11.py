import sys, random
sys.path.insert(0, "/tmp/qa_cache")
from h import *
port = 18501
def m():
    t = C.get(f"http://localhost:{port}/metrics").text
    g = lambda k: float(next(l.split()[-1] for l in t.splitlines() if l.startswith(k)))
    return g("rwkv_prefix_cache_hits_total"), g("rwkv_prefix_cache_misses_total"), g("rwkv_prefix_cache_tokens_saved_total")
rng = random.Random(77)
P = [rng.randrange(1, 60000) for _ in range(100)]
h0 = health(port); m0 = m()
comp(port, P, max_tokens=5); h1 = health(port)
comp(port, P, max_tokens=5); h2 = health(port)
comp(port, P + [5, 6, 7], max_tokens=5); h3 = health(port)
comp(port, [9] + P, max_tokens=5); h4 = health(port); m4 = m()
for a, b, lab in [(h0, h1, "cold"), (h1, h2, "same"), (h2, h3, "ext"), (h3, h4, "other")]:
    print(lab, "hits+", b["hits"] - a["hits"], "miss+", b["misses"] - a["misses"], "saved+", b["tokens_saved"] - a["tokens_saved"], "prefilled+", b["prefilled_tokens"] - a["prefilled_tokens"])
print("metrics vs health", m4, (h4["hits"], h4["misses"], h4["tokens_saved"]))
