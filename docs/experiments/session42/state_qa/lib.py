import httpx, json, struct, time, numpy as np
URL = "http://127.0.0.1:8451"
C = httpx.Client(base_url=URL, timeout=300)
ZERO = dict(presence_penalty=0, repetition_penalty=0, penalty_decay=1)
GREEDY = dict(temperature=0)

def post(path, body=None, **kw):
    r = C.post(path, json=body, **kw)
    if r.status_code >= 300:
        raise RuntimeError(f"{path} {r.status_code} {r.text}")
    return r.json()

def get(path):
    r = C.get(path); r.raise_for_status(); return r.json()

def wait(tid, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout:
        r = get(f"/v1/tasks/{tid}/get_result")
        if r["finished"]:
            return r
        time.sleep(0.05)
    raise TimeoutError(tid)

def run(path, body):
    r = post(path, body)
    tid = r["task_id"]
    res = wait(tid)
    return tid, res["result"]

def export(tid):
    r = C.get(f"/v1/tasks/{tid}/export_state"); r.raise_for_status()
    data = r.content
    n = struct.unpack("<Q", data[:8])[0]
    hdr = json.loads(data[8:8+n])
    meta = hdr.pop("__metadata__")
    body = data[8+n:]
    tens = {}
    for k, v in hdr.items():
        a, b = v["data_offsets"]
        tens[k] = np.frombuffer(body[a:b], dtype={"F32": np.float32, "F16": np.float16, "BF16": np.uint16}[v["dtype"]]).reshape(v["shape"])
    hist = json.loads(meta["history"]); cur = json.loads(meta["current_token"])
    pend = json.loads(meta.get("pending", "[]"))
    return dict(history=hist, current=cur, pending=pend, tensors=tens, raw=data, meta=meta)

def seq(tid):
    """every token the task holds: history + pending + current"""
    e = export(tid)
    return e["history"] + e["pending"] + ([] if e["current"] is None else [e["current"]])

def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y: return i
    return None if len(a) == len(b) else min(len(a), len(b))

def enc(text):
    # encode through the server: a max_tokens 0 tmp... use create+export
    tid = post("/v1/tasks/create", dict(prompt=text, max_tokens=0))["task_id"]
    s = seq(tid)
    post(f"/v1/tasks/{tid}/delete")
    return s

def state_equal(e1, e2):
    return all(np.array_equal(e1["tensors"][k], e2["tensors"][k]) for k in ("shift", "wkv"))
