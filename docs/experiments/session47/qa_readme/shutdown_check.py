"""Start streams on a keyed server, SIGTERM it mid-stream, record what clients see."""
import os, sys, time, json, signal, threading, subprocess, httpx
P, KEY, PID = 8103, "secret123", int(sys.argv[1])
H = {"Authorization": f"Bearer {KEY}"}
c = httpx.Client(base_url=f"http://localhost:{P}", headers=H, timeout=120)
res = {}
def oai_stream():
    lines = []
    try:
        with c.stream("POST", "/v1/chat/completions", json={"model": "rwkv-7", "stream": True, "max_tokens": 40000, "reasoning_effort": "none", "messages": [{"role": "user", "content": "x"}]}) as s:
            for l in s.iter_lines():
                if l: lines.append(l)
    except Exception as e: lines.append(f"EXC {type(e).__name__} {e}")
    res["oai_stream"] = lines[-3:]
def oai_nonstream():
    r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": "x", "max_tokens": 40000})
    res["oai_nonstream"] = (r.status_code, r.headers.get("retry-after"), r.text[:300])
def task_stream():
    lines = []
    with c.stream("POST", "/v1/tasks/create", json={"prompt": "User: x\n\nAssistant:", "max_tokens": 40000, "stream": True}) as s:
        for l in s.iter_lines():
            if l: lines.append(l)
    res["task_stream_first"] = lines[:1]; res["task_stream"] = lines[-3:]
ts = [threading.Thread(target=f) for f in (oai_stream, oai_nonstream, task_stream)]
for t in ts: t.start()
time.sleep(4)
os.kill(PID, signal.SIGTERM); t0 = time.time()
time.sleep(0.3)
try:
    r = httpx.post(f"http://localhost:{P}/v1/completions", headers=H, json={"model": "rwkv-7", "prompt": "x", "max_tokens": 3}, timeout=5)
    res["new_request_during_drain"] = (r.status_code, r.headers.get("retry-after"), r.text[:200])
except Exception as e: res["new_request_during_drain"] = f"EXC {type(e).__name__} {e}"
for t in ts: t.join(60)
res["joined_after_s"] = round(time.time() - t0, 2)
print(json.dumps(res, indent=1, ensure_ascii=False)[:4000])
