import sys, time, json, re, socket
sys.path.insert(0, "/work/main")
import httpx
from prometheus_client.parser import text_string_to_metric_families
from server.model.tokenizer import Tokenizer

BASE = "http://127.0.0.1:8791"
TOK = Tokenizer("/work/main/eof_v20230424.txt")
c = httpx.Client(base_url=BASE, timeout=120)

def scrape():
    r = httpx.get(BASE + "/metrics")
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            key = s.name + ("{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}" if s.labels else "")
            out[key] = s.value
    return out

def health():
    return httpx.get(BASE + "/health").json()

def delta(a, b):
    keys = set(a) | set(b)
    d = {k: b.get(k, 0) - a.get(k, 0) for k in keys}
    return {k: v for k, v in d.items() if v}

def show(d, pat=""):
    for k in sorted(d):
        if pat in k and "_bucket" not in k:
            print(f"   {k}: {d[k]:g}")

def ntok(s):
    return len(TOK.encode(s))

def wait_idle(timeout=60):
    t = time.time()
    while time.time() - t < timeout:
        h = health()
        if h["active"] == 0 and h["queue"] == 0 and h["finishing"] == 0:
            time.sleep(0.3)
            return h
        time.sleep(0.2)
    raise RuntimeError("not idle")

def chat(messages, **kw):
    body = {"model": "rwkv-7", "messages": messages, "reasoning_effort": "none", "temperature": 1.0, **kw}
    t0 = time.perf_counter()
    r = c.post("/v1/chat/completions", json=body)
    return r, time.perf_counter() - t0

def chat_stream(messages, **kw):
    body = {"model": "rwkv-7", "messages": messages, "reasoning_effort": "none", "stream": True,
            "stream_options": {"include_usage": True}, **kw}
    t0 = time.perf_counter(); first = None; usage = None; text = ""; chunks = 0
    with c.stream("POST", "/v1/chat/completions", json=body) as r:
        for line in r.iter_lines():
            if not line.startswith("data: "): continue
            data = line[6:]
            if data == "[DONE]": break
            j = json.loads(data)
            if j.get("usage"): usage = j["usage"]
            for ch in j.get("choices", []):
                piece = ch.get("delta", {}).get("content") or ch.get("delta", {}).get("reasoning_content")
                if piece:
                    if first is None: first = time.perf_counter() - t0
                    text += piece; chunks += 1
    return dict(status=r.status_code, ttft=first, total=time.perf_counter() - t0, usage=usage, text=text, chunks=chunks)
