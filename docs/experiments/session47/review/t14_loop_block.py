"""Finding: response_format's grammar is compiled on the event loop (openai.py _grammar ->
response_grammar -> llguidance, and TaskService.round_settings), unlike forced_call_grammar
(off_loop_if_big). A 0.5 MB schema blocks every other request for seconds."""
import json, threading, time
from server_common import live, httpx
s = {"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": "[a-z]{3}[0-9]+"} for i in range(9000)}}
fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}
with live() as srv:
    def probe(stop, out):
        c = httpx.Client(base_url=srv.url, timeout=60)
        while not stop.is_set():
            t = time.time(); c.get("/health"); out.append(time.time() - t); time.sleep(0.02)
    for path, body in [("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "response_format": fmt}),
                       ("/v1/tasks/tmp", {"prompt": "hi", "max_tokens": 1, "response_format": fmt}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x" * 500000}], "max_tokens": 1})]:
        stop, lat = threading.Event(), []
        th = threading.Thread(target=probe, args=(stop, lat)); th.start(); time.sleep(0.3)
        t = time.time()
        r = httpx.post(srv.url + path, json=body, timeout=120)
        dt = time.time() - t; time.sleep(0.2); stop.set(); th.join()
        print(f"{path} body {len(json.dumps(body))} B -> {r.status_code} in {dt:.2f}s; /health max latency meanwhile {max(lat)*1e3:.0f} ms")
