import json, httpx
from openai import OpenAI
BASE = "http://127.0.0.1:8791"
client = OpenAI(base_url=BASE + "/v1", api_key="x", max_retries=0, timeout=120)
H = httpx.Client(base_url=BASE, timeout=120)
def raw(path, body, method="POST"):
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    r = H.request(method, path, content=body, headers={"Content-Type": "application/json"})
    try:
        j = r.json()
    except Exception:
        j = r.text
    return r.status_code, j
def chat(**kw):
    kw.setdefault("model", "rwkv-7"); kw.setdefault("messages", [{"role": "user", "content": "Give JSON"}])
    return raw("/v1/chat/completions", kw)
def comp(**kw):
    kw.setdefault("model", "rwkv-7"); kw.setdefault("prompt", "Hello")
    return raw("/v1/completions", kw)
def shape_ok(j, param):
    return isinstance(j, dict) and set(j.get("error", {}).keys()) == {"message","type","param","code"} and j["error"]["param"] == param
