import json, sys, httpx
sys.path.insert(0, "/work/main")
BASE = "http://127.0.0.1:8431"
C = httpx.Client(base_url=BASE, timeout=120)

def post(path, body):
    r = C.post(path, json=body)
    return r.status_code, r.json()

def sse(path, body=None, method="POST"):
    """Returns list of parsed data events (json or '[DONE]') and raw lines."""
    events, raw = [], b""
    with C.stream(method, path, json=body) as r:
        for chunk in r.iter_bytes():
            raw += chunk
    text = raw.decode("utf-8")  # strict: a broken char would raise
    for block in text.split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                d = line[6:]
                events.append(d if d == "[DONE]" else json.loads(d))
    return events, raw

def chat(body):
    return post("/v1/chat/completions", body)

def chat_stream(body):
    b = dict(body, stream=True)
    ev, raw = sse("/v1/chat/completions", b)
    content, reasoning, fin, usage, deltas = "", "", None, None, []
    for e in ev:
        if e == "[DONE]": continue
        if e.get("usage"): usage = e["usage"]
        for ch in e.get("choices", []):
            d = ch.get("delta", {})
            if d.get("content"): content += d["content"]; deltas.append(d["content"])
            if d.get("reasoning_content"): reasoning += d["reasoning_content"]
            if ch.get("finish_reason"): fin = ch["finish_reason"]
    return dict(content=content, reasoning=reasoning, finish=fin, usage=usage, deltas=deltas, events=ev)

def comp(body):
    return post("/v1/completions", body)

def comp_stream(body):
    b = dict(body, stream=True)
    ev, raw = sse("/v1/completions", b)
    texts, fins, usage, deltas = {}, {}, None, []
    for e in ev:
        if e == "[DONE]": continue
        if e.get("usage"): usage = e["usage"]
        for ch in e.get("choices", []):
            texts[ch["index"]] = texts.get(ch["index"], "") + ch.get("text", "")
            if ch.get("text"): deltas.append((ch["index"], ch["text"]))
            if ch.get("finish_reason"): fins[ch["index"]] = ch["finish_reason"]
    return dict(texts=texts, finish=fins, usage=usage, deltas=deltas, events=ev)

import struct, time
from server.model.tokenizer import Tokenizer, IncrementalDecoder
TOK = Tokenizer()

def wait_task(tid):
    while True:
        r = C.get(f"/v1/tasks/{tid}/get_result").json()
        if r["finished"]: return r
        time.sleep(0.1)

def gen_tokens(prompt, **params):
    """Generated token ids of a persistent task (via export_state's history)."""
    st, tk = post("/v1/tasks/create", dict(prompt=prompt, **params))
    assert st == 200, tk
    tid = tk["task_id"]
    res = wait_task(tid)
    data = C.get(f"/v1/tasks/{tid}/export_state").content
    (n,) = struct.unpack("<Q", data[:8])
    meta = json.loads(data[8:8 + n])["__metadata__"]
    hist = json.loads(meta["history"]); cur = json.loads(meta["current_token"])
    p = TOK.encode(prompt) if isinstance(prompt, str) else prompt
    assert hist[:len(p)] == p, (hist[:len(p)], p)
    toks = hist[len(p):] + ([cur] if cur is not None else [])
    C.post(f"/v1/tasks/{tid}/delete")
    return toks, res["result"]
