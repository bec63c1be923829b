"""Part 5: a big schema: does compiling it block the event loop (health latency) on each route?"""
import json, threading, time
import httpx
from h import *

f = open("/tmp/qa46c/qa/t5_bigschema.out", "w")
props = {f"k{i}": {"type": "string", "pattern": "^[a-z]{1,8}(-[0-9]{2,4}){0,3}$"} for i in range(1500)}
schema = {"type": "object", "properties": props, "required": list(props)[:50], "additionalProperties": False}
RFB = {"type": "json_schema", "json_schema": {"name": "big", "schema": schema}}
log(f, "body bytes:", len(json.dumps(RFB)))


def probe(stop, lat):
    c = httpx.Client(base_url=BASE, timeout=60)
    while not stop.is_set():
        t0 = time.time()
        c.get("/health")
        lat.append(time.time() - t0)
        time.sleep(0.02)


for label, path, body in [
        ("task tmp", "/v1/tasks/tmp", {"prompt": "x", "max_tokens": 1, "response_format": RFB}),
        ("chat", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}],
                                          "max_tokens": 1, "response_format": RFB}),
        ("completions", "/v1/completions", {"model": "rwkv-7", "prompt": "x", "max_tokens": 1, "response_format": RFB}),
        ("forced tool", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}],
                                                 "max_tokens": 1, "tool_choice": "required",
                                                 "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]})]:
    stop, lat = threading.Event(), []
    th = threading.Thread(target=probe, args=(stop, lat)); th.start()
    time.sleep(0.3)
    t0 = time.time()
    r = C.post(path, json=body)
    dt = time.time() - t0
    time.sleep(0.3)
    stop.set(); th.join()
    log(f, f"{label}: status={r.status_code} request {dt:.2f}s; /health max latency {max(lat):.3f}s over {len(lat)} probes; {r.text[:120]}")
