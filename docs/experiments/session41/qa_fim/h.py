import json, sys, httpx
sys.path.insert(0, "/work/main")
from server.model.tokenizer import Tokenizer
TOK = Tokenizer("/work/main/eof_v20230424.txt")
B = "http://localhost:8106"
C = httpx.Client(base_url=B, timeout=300)
def post(path, body):
    r = C.post(path, json=body)
    try: return r.status_code, r.json()
    except Exception: return r.status_code, r.text
def sse(path, body):
    out = []
    with C.stream("POST", path, json=body) as r:
        raw = ""
        for line in r.iter_lines():
            raw += line + "\n"
            if line.startswith("data: "):
                d = line[6:]
                out.append(d if d == "[DONE]" else json.loads(d))
    return r.status_code, out, raw
def fim(prefix, suffix): return f"✿prefix✿✿suffix✿{suffix}✿middle✿{prefix}"
def wait(tid):
    import time
    for _ in range(600):
        r = C.get(f"/v1/tasks/{tid}/get_result").json()
        if r["finished"]: return r
        time.sleep(0.1)
