import httpx, json, time, random, sys, threading
from concurrent.futures import ThreadPoolExecutor
C = httpx.Client(timeout=600)
def chat(port, messages, **kw):
    body = {"model": "rwkv-7", "messages": messages, "max_tokens": 48, "temperature": 0, **kw}
    r = C.post(f"http://localhost:{port}/v1/chat/completions", json=body)
    j = r.json()
    if r.status_code != 200: return ("ERR", r.status_code, j)
    m = j["choices"][0]["message"]
    return (m.get("content"), m.get("reasoning_content"), j["choices"][0]["finish_reason"], j["usage"]["prompt_tokens"], j["usage"]["completion_tokens"])
def comp(port, prompt, **kw):
    body = {"model": "rwkv-7", "prompt": prompt, "max_tokens": 48, "temperature": 0, **kw}
    r = C.post(f"http://localhost:{port}/v1/completions", json=body)
    j = r.json()
    if r.status_code != 200: return ("ERR", r.status_code, j)
    return (j["choices"][0]["text"], j["choices"][0]["finish_reason"], j["usage"]["prompt_tokens"], j["usage"]["completion_tokens"])
def task(port, path, body, wait=True):
    r = C.post(f"http://localhost:{port}/v1/tasks/{path}", json=body)
    j = r.json()
    if r.status_code != 200: return ("ERR", r.status_code, j), None
    tid = j["task_id"]
    if not wait: return j, tid
    for _ in range(6000):
        g = C.get(f"http://localhost:{port}/v1/tasks/{tid}/get_result").json()
        if g.get("finished"): return g["result"], tid
        time.sleep(0.05)
    return ("TIMEOUT",), tid
def health(port):
    return C.get(f"http://localhost:{port}/health").json()["prefix_cache"]
