import json, httpx, sys
BASE = "http://localhost:8102"
C = httpx.Client(base_url=BASE, timeout=300)

def comp(prompt, stream=False, **kw):
    body = dict(model="rwkv-7", prompt=prompt, stream=stream, **kw)
    if not stream:
        r = C.post("/v1/completions", json=body)
        if r.status_code != 200:
            return ("ERR", r.status_code, r.text[:300])
        return [c["text"] for c in sorted(r.json()["choices"], key=lambda c: c["index"])]
    out = {}
    with C.stream("POST", "/v1/completions", json=body) as r:
        if r.status_code != 200:
            return ("ERR", r.status_code, r.read()[:300])
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                d = json.loads(line[6:])
                for c in d.get("choices", []):
                    out[c["index"]] = out.get(c["index"], "") + (c.get("text") or "")
    return [out[i] for i in sorted(out)]

def chat(content, stream=False, **kw):
    body = dict(model="rwkv-7", messages=[{"role": "user", "content": content}],
                reasoning_effort="none", stream=stream, **kw)
    if not stream:
        r = C.post("/v1/chat/completions", json=body)
        if r.status_code != 200:
            return ("ERR", r.status_code, r.text[:300])
        return [c["message"]["content"] for c in sorted(r.json()["choices"], key=lambda c: c["index"])]
    out = {}
    with C.stream("POST", "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            return ("ERR", r.status_code, r.read()[:300])
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                d = json.loads(line[6:])
                for c in d.get("choices", []):
                    out[c["index"]] = out.get(c["index"], "") + (c["delta"].get("content") or "")
    return [out[i] for i in sorted(out)]

def task(prompt, path="/v1/tasks/tmp", **kw):
    body = dict(prompt=prompt, stream=True, **kw)
    text = ""
    with C.stream("POST", path, json=body) as r:
        if r.status_code != 200:
            return ("ERR", r.status_code, r.read()[:300])
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                d = json.loads(line[6:])
                if "error" in d:
                    return ("ERR-EVENT", d)
                text += d.get("data", "")
    return text
