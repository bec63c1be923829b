"""Probes /metrics and /health (item 5 of session 66's QA brief): the text parses with
prometheus_client's parser; counters never decrease between scrapes with load in between;
histogram buckets are cumulative, +Inf == _count, _sum >= 0; gauges match /health.

    uv run python docs/experiments/session66/qa/metrics_probe.py http://localhost:8811
"""
import sys, time
import httpx
from prometheus_client.parser import text_string_to_metric_families

URL = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8811"
c = httpx.Client(base_url=URL, timeout=120)
fails = []


def scrape():
    r = c.get("/metrics")
    assert r.status_code == 200, r.status_code
    ct = r.headers.get("content-type")
    fams = list(text_string_to_metric_families(r.text))
    samples = {}
    for f in fams:
        for s in f.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return fams, samples, ct


def check_hist(fams):
    for f in fams:
        if f.type != "histogram":
            continue
        groups = {}
        for s in f.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            groups.setdefault(key, {"b": []})
            if s.name.endswith("_bucket"):
                groups[key]["b"].append((float(s.labels["le"]), s.value))
            elif s.name.endswith("_count"):
                groups[key]["count"] = s.value
            elif s.name.endswith("_sum"):
                groups[key]["sum"] = s.value
        for key, g in groups.items():
            b = sorted(g["b"])
            vals = [v for _, v in b]
            if vals != sorted(vals):
                fails.append(f"{f.name}{key}: buckets not cumulative {vals}")
            if b and b[-1][0] != float("inf"):
                fails.append(f"{f.name}{key}: no +Inf bucket")
            if b and g.get("count") != b[-1][1]:
                fails.append(f"{f.name}{key}: +Inf {b[-1][1]} != count {g.get('count')}")
            if g.get("sum", 0) < 0:
                fails.append(f"{f.name}{key}: negative sum {g['sum']}")


fams1, s1, ct = scrape()
print("content-type:", ct, "families:", len(fams1))
print("types:", sorted({(f.name, f.type) for f in fams1})[:80])
check_hist(fams1)
# load: several kinds of requests, including errors and a dropped stream
for i in range(6):
    c.post("/v1/chat/completions", json={"model": "rwkv-7", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]})
    c.post("/v1/completions", json={"model": "rwkv-7", "max_tokens": 8, "prompt": "abc", "echo": True, "logprobs": 1})
    c.post("/v1/completions", json={"model": "rwkv-7", "max_tokens": -1, "prompt": "abc"})
    c.post("/v1/tasks/tmp", json={"prompt": "x", "max_tokens": 4})
    c.get("/v1/tasks/NOPE/status")
    c.get("/nonexistent/path")
with c.stream("POST", "/v1/completions", json={"model": "rwkv-7", "stream": True, "max_tokens": 500, "prompt": "x"}) as r:
    for line in r.iter_lines():
        break
time.sleep(2)
fams2, s2, _ = scrape()
check_hist(fams2)
types = {}
for f in fams2:
    types[f.name] = f.type
for (name, labels), v in s1.items():
    base = name
    for suf in ("_total", "_bucket", "_count", "_sum"):
        if name.endswith(suf):
            base = name[: -len(suf)]
    t = types.get(base) or types.get(name)
    if t in ("counter", "histogram") and not name.endswith("_created"):
        v2 = s2.get((name, labels))
        if v2 is None:
            fails.append(f"{name}{labels} disappeared")
        elif v2 < v:
            fails.append(f"{name}{labels} decreased {v} -> {v2}")
new = [k for k in s2 if k not in s1]
print("new series after load:", len(new), [f"{n}{dict(l)}" for n, l in new][:12])
h = c.get("/health").json()
for g, hk in (("rwkv_capacity", "capacity"), ("rwkv_active_slots", "active"), ("rwkv_queue_length", "queue"),
              ("rwkv_max_batch_size", "max_batch_size")):
    mv = s2.get((g, ()))
    if mv is not None and mv != h[hk]:
        print(f"note: {g}={mv} vs /health {hk}={h[hk]} (scrapes 0 s apart)")
# HEAD
for p in ("/metrics", "/health"):
    r = c.head(p)
    print("HEAD", p, r.status_code, len(r.content), r.headers.get("content-type"))
# unusual routes / methods
for m, p in (("POST", "/metrics"), ("POST", "/health"), ("GET", "/metrics?x=1"), ("GET", "/metrics/")):
    r = c.request(m, p); print(m, p, r.status_code, r.text[:100])
print("route labels:", sorted({dict(l).get("route") for n, l in s2 if n == "rwkv_http_requests_total"}))
print("FAILS:" if fails else "no failures", *fails, sep="\n  ")
