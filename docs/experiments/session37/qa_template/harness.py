"""Two in-process servers (cache on / off) on the tiny random model; run the same scenario on
both and compare.  Run from /work/main:  OMP_NUM_THREADS=1 uv run python /tmp/qa_tpl/<script>.py"""
import hashlib
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = os.environ.get("REPO", "/work/main")
sys.path[:0] = [REPO, REPO + "/test"]
import torch  # noqa

torch.set_num_threads(1)
import httpx  # noqa
from openai_helpers import LiveServer  # noqa
from server.config import Settings  # noqa

MODEL = "/tmp/qa_tpl/tiny.pth"
SEEDED = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "seed": 7}


def settings(db, **kw):
    kw = {"api_key": None, "verbose": False, "buffer_size": 8, "max_batch_size": 64,
          "chat_think": False, **kw}
    return Settings(model_path=MODEL, demo=None, device="cpu", task_db_path=db, **kw)


class Pair:
    def __init__(self, tag="p", on_mb=64, db_dir=None, **kw):
        d = db_dir or tempfile.mkdtemp(prefix=f"qa_{tag}_", dir="/tmp/qa_tpl")
        self.dir = d
        self.kw = kw
        self.on_mb = on_mb
        self._start()

    def _start(self):
        self.srv = {}
        self.c = {}
        for name, mb in (("on", self.on_mb), ("off", 0)):
            s = LiveServer(settings(os.path.join(self.dir, f"{name}.db"), state_cache_mb=mb,
                                    **self.kw)).__enter__()
            self.srv[name] = s
            self.c[name] = httpx.Client(base_url=s.url, timeout=300)

    def restart(self):
        for n in ("on", "off"):
            self.c[n].close()
            self.srv[n].__exit__(None, None, None)
        self._start()

    def close(self):
        for n in ("on", "off"):
            self.c[n].close()
            self.srv[n].__exit__(None, None, None)

    def both(self, fn, *a, **k):
        return fn(self.c["on"], *a, **k), fn(self.c["off"], *a, **k)

    def stats(self):
        return self.c["on"].get("/health").json()["prefix_cache"]


# ---- Task API helpers ----
def wait(c, tid, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        r = c.get(f"/v1/tasks/{tid}/get_result")
        assert r.status_code == 200, r.text
        j = r.json()
        if j["finished"]:
            return j
        time.sleep(0.02)
    raise TimeoutError(tid)


def create(c, prompt, **kw):
    r = c.post("/v1/tasks/create", json={"prompt": prompt, **kw})
    assert r.status_code == 200, r.text
    return wait(c, r.json()["task_id"])


def fork(c, tid, prompt=None, **kw):
    body = dict(kw)
    if prompt is not None:
        body["prompt"] = prompt
    r = c.post(f"/v1/tasks/{tid}/fork", json=body)
    if r.status_code != 200:
        return {"error": r.status_code, "text": r.text}
    return wait(c, r.json()["task_id"])


def as_template(c, tid):
    r = c.post(f"/v1/tasks/{tid}/as_template")
    assert r.status_code == 200, r.text
    return r.json()["task_id"]


def export(c, tid):
    r = c.get(f"/v1/tasks/{tid}/export_state")
    assert r.status_code == 200, r.text
    return r.content


def state_hash(c, tid):
    """sha of the tensors' bytes + history + current_token (not the meta, which names ids)."""
    import struct
    data = export(c, tid)
    n = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + n])
    meta = head["__metadata__"]
    h = hashlib.sha256(data[8 + n:])
    h.update((meta.get("history", "") + meta.get("current_token", "") + meta.get("pending", "")).encode())
    return h.hexdigest()[:16]


def chat(c, model, messages, **kw):
    r = c.post("/v1/chat/completions", json={"model": model, "messages": messages,
                                               "max_tokens": 12, **kw})
    if r.status_code != 200:
        return {"error": r.status_code, "text": r.text[:300]}
    j = r.json()
    return [ch["message"]["content"] for ch in j["choices"]]


def chat_stream(c, model, messages, **kw):
    body = {"model": model, "messages": messages, "max_tokens": 12, "stream": True, **kw}
    out = {}
    with c.stream("POST", "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            return {"error": r.status_code, "text": r.read()[:300]}
        for line in r.iter_lines():
            if line.startswith("data: {"):
                j = json.loads(line[6:])
                for ch in j["choices"]:
                    out.setdefault(ch["index"], "")
                    out[ch["index"]] += ch.get("delta", {}).get("content") or ""
    return [out[k] for k in sorted(out)]


def completion(c, model, prompt, **kw):
    r = c.post("/v1/completions", json={"model": model, "prompt": prompt, "max_tokens": 12,
                                         **kw})
    if r.status_code != 200:
        return {"error": r.status_code, "text": r.text[:300]}
    return [ch["text"] for ch in r.json()["choices"]]


def toks(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(300, 60000, (n,), generator=g).tolist()


class Cmp:
    def __init__(self):
        self.bad = []
        self.n = 0

    def eq(self, label, a, b):
        self.n += 1
        if a != b:
            self.bad.append(label)
            print(f"  DIFF {label}:\n     on ={str(a)[:200]}\n     off={str(b)[:200]}",
                  flush=True)
        return a == b

    def report(self):
        print(f"compared {self.n}, differing {len(self.bad)}: {self.bad}", flush=True)
