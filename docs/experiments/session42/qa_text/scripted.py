"""An in-process server (the project's own test harness: real routes, splitter, SSE) whose
OpenAI requests 'generate' a scripted list of TOKEN IDS (byte tokens included)."""
import json, sys, os, tempfile, time, threading
sys.path.insert(0, "/work/main"); sys.path.insert(0, "/work/main/test")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import httpx
from openai_helpers import LiveServer, ScriptedScheduler
from server.config import Settings
from server.model.tokenizer import Tokenizer
TOK = Tokenizer()
BYTE = {}
for i in range(1, 65536):
    b = TOK.token_bytes(i)
    if len(b) == 1: BYTE[b[0]] = i

def ids(*parts):
    """parts: str (tokenized) or bytes (one byte token per byte)."""
    out = []
    for p in parts:
        out += TOK.encode(p) if isinstance(p, str) else [BYTE[b] for b in p]
    return out

def start(**kw):
    s = Settings(demo="tiny", device="cpu", api_key=None, chat_think=False, verbose=False,
                 task_db_path=os.path.join(tempfile.mkdtemp(), "t.db"), **kw)
    srv = LiveServer(s).__enter__()
    return srv, httpx.Client(base_url=srv.url, timeout=60)

def script(srv, tokens, reason="stop", per_pulse=1):
    fake = ScriptedScheduler(srv.runtime.loader, "x", reason=reason, per_pulse=per_pulse)
    fake.tokens = list(tokens)
    srv.runtime.scheduler = fake
    return fake

def sse(c, path, body):
    ev = []
    with c.stream("POST", path, json=body) as r:
        raw = r.read().decode("utf-8")
    for blk in raw.split("\n\n"):
        for line in blk.split("\n"):
            if line.startswith("data: "):
                d = line[6:]; ev.append(d if d == "[DONE]" else json.loads(d))
    return ev
