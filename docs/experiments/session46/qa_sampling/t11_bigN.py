"""n=128 with a large (166 KB) anyOf schema: time to answer, /health latency meanwhile, then the same with a client disconnect after 2 s."""
import sys, json, time, threading; sys.path.insert(0, "/tmp/qa46/qa")
from common import *
import httpx
big = {"anyOf": [{"type": "object", "properties": {f"k{i}": {"const": i}}, "required": [f"k{i}"]} for i in range(2000)]}
body = {"model": "rwkv-7", "prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": big}}, "max_tokens": 20, "n": 128}
def probe(stop, lat):
    while not stop.is_set():
        t = time.time(); httpx.get(BASE + "/health", timeout=120); lat.append(time.time() - t); time.sleep(0.05)
stop, lat = threading.Event(), []
th = threading.Thread(target=probe, args=(stop, lat)); th.start()
t = time.time(); r = httpx.post(BASE + "/v1/completions", json=body, timeout=300); el = time.time() - t
stop.set(); th.join()
j = r.json()
print(f"n=128 big schema: {r.status_code} in {el:.1f}s; health max latency {max(lat):.2f}s; finishes {sorted(set(c['finish_reason'] for c in j['choices']))}")
bad = [c for c in j["choices"] if c["finish_reason"] == "stop" and not isinstance(json.loads(c["text"]), dict)]
print("invalid:", len(bad))
# plain greedy request latency while a big constrained one is being set up
def bg():
    try: httpx.post(BASE + "/v1/completions", json=body, timeout=300)
    except Exception as e: print("bg", e)
tb = threading.Thread(target=bg); tb.start(); time.sleep(0.3)
t = time.time(); c, j = comp(prompt="plain", max_tokens=5, temperature=0); print(f"plain request during big setup: {c} {time.time()-t:.2f}s")
tb.join()
