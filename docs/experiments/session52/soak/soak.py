"""Session 52 QA soak: mixed OpenAI + Task API + HEAD traffic, 12 workers, monitor every 60 s.
usage: soak.py DURATION_S NWORKERS SERVER_PID"""
import httpx, json, random, threading, time, sys, re, collections, traceback, subprocess, os

BASE = "http://127.0.0.1:18611"
DUR = float(sys.argv[1]); NW = int(sys.argv[2]); PID = int(sys.argv[3])
OUT = "/tmp/soak52"
LOG = f"{OUT}/server.log"
TIMEOUT = 60.0
lock = threading.Lock()
codes = collections.Counter()           # (endpoint, code)
lat = collections.defaultdict(list)
fivexx = []
timeouts = []
slow = []
anoms = []
checks = collections.Counter()
F_ANOM = open(f"{OUT}/anomalies.jsonl", "a")
F_5XX = open(f"{OUT}/5xx.jsonl", "a")
F_SLOW = open(f"{OUT}/slow.jsonl", "a")

ID_RE = re.compile(r"/v1/tasks/(TASK_|TMP_|_)[A-Za-z0-9_.\-]*")
def norm(method, path):
    p = path.split("?")[0]
    p = ID_RE.sub("/v1/tasks/{id}", p)
    if p.startswith("/v1/tasks/") and p.count("/") == 4 and "{id}" not in p and p.split("/")[3] not in ("tmp", "create", "fim", "list", "import_state"):
        p = "/v1/tasks/{bad_id}/" + p.split("/")[4]
    return f"{method} {p}"

def anomaly(kind, what, req=None, resp=None):
    rec = {"t": round(time.time() - T0, 1), "kind": kind, "what": what, "req": req, "resp": resp}
    with lock:
        anoms.append(rec); F_ANOM.write(json.dumps(rec, default=str)[:20000] + "\n"); F_ANOM.flush()

def record(ep, code, dt, req=None, body=None):
    with lock:
        codes[(ep, code)] += 1
        lat[ep].append(dt)
        if isinstance(code, int) and code >= 500:
            r = {"t": round(time.time() - T0, 1), "ep": ep, "code": code, "req": req, "body": (body or "")[:3000]}
            fivexx.append(r); F_5XX.write(json.dumps(r, default=str) + "\n"); F_5XX.flush()
        if dt > 30:
            r = {"t": round(time.time() - T0, 1), "ep": ep, "code": code, "dt": round(dt, 2), "req": req}
            slow.append(r); F_SLOW.write(json.dumps(r, default=str) + "\n"); F_SLOW.flush()

def call(c, method, path, label=None, **kw):
    ep = label or norm(method, path)
    t0 = time.time()
    try:
        r = c.request(method, BASE + path, **kw)
    except httpx.TimeoutException as e:
        dt = time.time() - t0
        with lock:
            timeouts.append({"t": round(t0 - T0, 1), "ep": ep, "exc": repr(e)[:200], "req": str(kw.get("json"))[:500]})
            F_SLOW.write(json.dumps({"timeout": ep, "t": round(t0 - T0, 1), "req": str(kw.get("json"))[:500]}) + "\n"); F_SLOW.flush()
        record(ep, "TIMEOUT", dt, kw.get("json"))
        return None
    dt = time.time() - t0
    record(ep, r.status_code, dt, kw.get("json") if "json" in kw else path, r.text if r.status_code >= 500 else None)
    return r

def sse(r):
    for line in r.iter_lines():
        if line.startswith("data: "):
            d = line[6:]
            if d == "[DONE]":
                yield None; return
            yield json.loads(d)

def stream_call(c, method, path, label=None, disconnect_after=None, **kw):
    """returns (status, events list, done, disconnected) or None on timeout"""
    ep = (label or norm(method, path)) + " [stream]"
    t0 = time.time(); evs = []; done = False; disc = False
    try:
        with c.stream(method, BASE + path, **kw) as r:
            if r.status_code != 200:
                r.read(); record(ep, r.status_code, time.time() - t0, kw.get("json") or path, r.text)
                return r.status_code, r.text, False, False
            for ev in sse(r):
                if ev is None:
                    done = True; break
                evs.append(ev)
                if disconnect_after is not None and len(evs) >= disconnect_after:
                    disc = True; break
    except httpx.TimeoutException as e:
        dt = time.time() - t0
        with lock:
            timeouts.append({"t": round(t0 - T0, 1), "ep": ep, "exc": repr(e)[:200], "req": str(kw.get("json"))[:500], "events": len(evs)})
            F_SLOW.write(json.dumps({"timeout": ep, "t": round(t0 - T0, 1), "req": str(kw.get("json"))[:500], "events": len(evs)}) + "\n"); F_SLOW.flush()
        record(ep, "TIMEOUT", dt, kw.get("json"))
        return None
    record(ep + (" (disconnected)" if disc else ""), 200, time.time() - t0, kw.get("json") or path)
    return 200, evs, done, disc

WORDS = ("alpha beta gamma delta river mountain cloud quick brown fox jumps over lazy dog weather time "
         "python code list dict tree graph number seven paris london json object").split()
def words(n): return " ".join(random.choice(WORDS) for _ in range(n))

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                         "required": ["city"]}}},
         {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}]
TEMPLATES = []

def chat_body(messages=None, model="rwkv-7"):
    b = {"model": model, "messages": messages or [{"role": "user", "content": words(random.randint(2, 40))}],
         "max_tokens": random.randint(1, 200), "stream": random.random() < 0.5}
    if random.random() < 0.3: b["n"] = random.randint(1, 3)
    if random.random() < 0.5: b["seed"] = random.randint(0, 10**6)
    if random.random() < 0.3: b["stop"] = random.choice(["\n", ["the", "."], "ing", ["\n\n"]])
    if random.random() < 0.5: b["temperature"] = random.choice([0, 0.5, 1.0, 1.3])
    if random.random() < 0.15:
        b["logprobs"] = True
        if random.random() < 0.7: b["top_logprobs"] = random.randint(0, 5)
    r = random.random()
    if r < 0.1: b["response_format"] = {"type": "json_object"}
    elif r < 0.22:
        b["tools"] = TOOLS
        b["tool_choice"] = random.choice(["auto", "required", "none", {"type": "function", "function": {"name": "get_weather"}}])
    if random.random() < 0.3: b["reasoning_effort"] = "none"
    return b

def do_chat(c, b, label="chat"):
    n = b.get("n", 1)
    if not b["stream"]:
        r = call(c, "POST", "/v1/chat/completions", json=b)
        if r is None or r.status_code != 200:
            if r is not None: anomaly(label, f"status {r.status_code}", b, r.text[:1500])
            return None
        j = r.json()
        if len(j["choices"]) != n: anomaly(label, f"{len(j['choices'])} choices for n={n}", b, j)
        for ch in j["choices"]:
            if ch["finish_reason"] not in ("stop", "length", "tool_calls"): anomaly(label, f"finish {ch['finish_reason']}", b, j)
        ct = j.get("usage", {}).get("completion_tokens", 0)
        if ct > n * b["max_tokens"]: anomaly(label, f"completion_tokens {ct} > n*max_tokens", b, j.get("usage"))
        checks["chat_ok"] += 1
        return j["choices"][0]["message"].get("content") or ""
    disc = random.randint(1, 5) if random.random() < 0.12 else None
    res = stream_call(c, "POST", "/v1/chat/completions", disconnect_after=disc, json=b)
    if res is None: return None
    st, evs, done, dd = res
    if st != 200:
        anomaly(label + "_stream", f"status {st}", b, evs[:1500]); return None
    if dd: return None
    errs = [e for e in evs if "error" in e]
    if errs: anomaly(label + "_stream", "error event", b, errs)
    if not done: anomaly(label + "_stream", "no [DONE]", b, evs[-3:])
    texts = collections.defaultdict(str); fins = {}
    for e in evs:
        for ch in e.get("choices", []):
            texts[ch.get("index", 0)] += (ch.get("delta") or {}).get("content") or ""
            if ch.get("finish_reason"): fins[ch.get("index", 0)] = ch["finish_reason"]
    if len(fins) != n: anomaly(label + "_stream", f"finish reasons {fins} for n={n}", b, evs[-3:])
    checks["chat_stream_ok"] += 1
    return texts[0]

def k_chat(c): do_chat(c, chat_body())

def k_multiturn(c):
    model = random.choice(["rwkv-7"] + [f"rwkv-7:{t}" for t in TEMPLATES]) if random.random() < 0.3 else "rwkv-7"
    msgs = [{"role": "system", "content": "You are a helpful bot. " + words(20)}] if random.random() < 0.5 else []
    for turn in range(random.randint(3, 6)):
        msgs.append({"role": "user", "content": words(random.randint(3, 25))})
        b = {"model": model, "messages": msgs, "max_tokens": random.randint(5, 60), "stream": random.random() < 0.5,
             "temperature": random.choice([0, 1.0]), "seed": random.randint(0, 999)}
        out = do_chat(c, b, "multiturn")
        if out is None: return
        msgs.append({"role": "assistant", "content": out})

def k_template_chat(c):
    if not TEMPLATES: return
    b = chat_body(model=f"rwkv-7:{random.choice(TEMPLATES)}")
    do_chat(c, b, "template_chat")

def k_completion(c):
    b = {"model": "rwkv-7", "prompt": words(random.randint(1, 80)), "max_tokens": random.randint(1, 200),
         "stream": random.random() < 0.4}
    if random.random() < 0.3: b["n"] = random.randint(1, 3)
    if random.random() < 0.5: b["seed"] = random.randint(0, 10**6)
    if random.random() < 0.2: b["stop"] = ["\n"]
    if not b["stream"] and random.random() < 0.3:
        b["echo"] = True; b["logprobs"] = random.randint(0, 5)
        if random.random() < 0.3: b["max_tokens"] = 0
    elif random.random() < 0.2: b["logprobs"] = random.randint(0, 3)
    if random.random() < 0.1 and not b.get("echo"): b["suffix"] = "\n    return x\n"
    if not b["stream"]:
        r = call(c, "POST", "/v1/completions", json=b)
        if r is None: return
        if r.status_code != 200: anomaly("completion", f"status {r.status_code}", b, r.text[:1500]); return
        j = r.json()
        if len(j["choices"]) != b.get("n", 1): anomaly("completion", "choice count", b, j)
        if b.get("echo"):
            for ch in j["choices"]:
                if not ch["text"].startswith(b["prompt"]): anomaly("completion", "echo text doesn't start with prompt", b, ch)
                lp = ch.get("logprobs")
                if lp is None or len(lp["tokens"]) != len(lp["token_logprobs"]): anomaly("completion", "echo logprobs shape", b, ch)
        checks["completion_ok"] += 1
    else:
        disc = random.randint(1, 4) if random.random() < 0.12 else None
        res = stream_call(c, "POST", "/v1/completions", disconnect_after=disc, json=b)
        if res is None: return
        st, evs, done, dd = res
        if st != 200: anomaly("completion_stream", f"status {st}", b, evs[:1500]); return
        if not dd:
            if not done: anomaly("completion_stream", "no [DONE]", b, evs[-3:])
            if any("error" in e for e in evs): anomaly("completion_stream", "error event", b, [e for e in evs if "error" in e])
        checks["completion_stream_ok"] += 1

def gen_params():
    p = {"max_tokens": random.randint(1, 200)}
    if random.random() < 0.5: p["temperature"] = random.choice([0, 0.7, 1.0])
    if random.random() < 0.5: p["seed"] = random.randint(0, 10**6)
    return p

def head(c, path, fast=True):
    t0 = time.time()
    r = call(c, "HEAD", path)
    dt = time.time() - t0
    if r is None: anomaly("HEAD", f"timeout on {path}"); return None
    if r.content: anomaly("HEAD", f"HEAD {path} returned a body ({len(r.content)} bytes)", None, r.content[:200].decode("utf8", "replace"))
    if fast and dt > 2.0: anomaly("HEAD", f"HEAD {path} took {dt:.2f}s", None, r.status_code)
    return r

def read_task_stream(c, tid, pos=None, disc=None):
    path = f"/v1/tasks/{tid}/stream" + (f"?pos={pos}" if pos is not None else "")
    return stream_call(c, "GET", path, disconnect_after=disc)

def wait_finished(c, tid, limit=40):
    t0 = time.time()
    while time.time() - t0 < limit:
        r = call(c, "GET", f"/v1/tasks/{tid}/status")
        if r is None or r.status_code != 200: return None
        if r.json()["status"] == 3: return True
        time.sleep(0.2)
    anomaly("task", f"task {tid} not finished after {limit}s")
    return False

def k_task_flow(c):
    persistent = random.random() < 0.7
    ep = "/v1/tasks/create" if persistent else "/v1/tasks/tmp"
    b = {"prompt": f"User: {words(random.randint(2, 30))}\n\nAssistant:", **gen_params()}
    stream = random.random() < 0.4
    if stream:
        b["stream"] = True
        disc = random.randint(1, 4) if random.random() < 0.15 else None
        res = stream_call(c, "POST", ep, disconnect_after=disc, json=b)
        if res is None: return
        st, evs, done, dd = res
        if st != 200: anomaly("task_stream", f"status {st}", b, evs); return
        tid = next((e.get("task_id") for e in evs if e.get("task_id")), None)
        if tid is None: return
        text = "".join(e.get("data", "") or "" for e in evs)
        if any("error" in e for e in evs): anomaly("task_stream", "error event", b, [e for e in evs if "error" in e])
        if dd:
            if not persistent: return
            wait_finished(c, tid)
        else:
            if not done: anomaly("task_stream", "no [DONE]", b, evs[-3:])
            r = call(c, "GET", f"/v1/tasks/{tid}/get_result")
            if r is not None and r.status_code == 200:
                g = r.json()
                if g["result"] != text and not text.endswith("\ufffd"): anomaly("task_stream", "get_result != streamed text", b, {"stream": text, "gr": g["result"]})
                checks["task_stream_match"] += 1
            elif r is not None and not (not persistent and r.status_code == 404):
                anomaly("task_stream", f"get_result {r.status_code}", b, r.text[:500])
            if not persistent: return
    else:
        r = call(c, "POST", ep, json=b)
        if r is None or r.status_code != 200:
            if r is not None: anomaly("task", f"{ep} status {r.status_code}", b, r.text[:1000])
            return
        tid = r.json()["task_id"]
        # while it runs: HEAD status/stream, GET status, stream with pos
        act = random.random()
        if act < 0.25:
            head(c, f"/v1/tasks/{tid}/status"); head(c, f"/v1/tasks/{tid}/stream")
        elif act < 0.45:
            pos = random.choice([None, 0, 1, 3, 10, 50])
            res = read_task_stream(c, tid, pos, disc=random.choice([None, None, None, 2]))
            if res and res[0] == 200 and not res[3] and not res[2]: anomaly("task_get_stream", "no [DONE]", tid, res[1][-3:])
        elif act < 0.55:
            r = call(c, "POST", f"/v1/tasks/{tid}/stop")
            if r is not None and r.status_code == 200 and r.json().get("status") != 3: anomaly("task_stop", "status after stop != 3", tid, r.text)
        elif act < 0.62:
            r = call(c, "POST", f"/v1/tasks/{tid}/delete")
            if r is not None and r.status_code not in (200, 404, 409): anomaly("task_delete_running", f"status {r.status_code}", tid, r.text)
            if r is not None and r.status_code == 200:
                r2 = call(c, "GET", f"/v1/tasks/{tid}/status")
                if r2 is not None and r2.status_code != 404: anomaly("task_delete_running", f"status after delete {r2.status_code}", tid, r2.text)
            return
        if not persistent:
            wait_finished(c, tid); call(c, "GET", f"/v1/tasks/{tid}/get_result"); return
        if not wait_finished(c, tid): return
    # finished persistent task: follow-ups
    r = call(c, "GET", f"/v1/tasks/{tid}/get_result")
    if r is not None and r.status_code == 200 and not r.json()["finished"]: anomaly("task", "get_result finished false after status 3", tid, r.text)
    for _ in range(random.randint(0, 2)):
        a = random.random()
        if a < 0.3:
            cb = {"prompt": f"\n\nUser: {words(5)}\n\nAssistant:", **gen_params(), "stream": random.random() < 0.5}
            if cb["stream"]:
                res = stream_call(c, "POST", f"/v1/tasks/{tid}/continue", json=cb)
                if res and res[0] == 200 and not res[2]: anomaly("task_continue", "no [DONE]", cb, res[1][-3:])
                if res and res[0] != 200: anomaly("task_continue", f"status {res[0]}", cb, res[1])
            else:
                r = call(c, "POST", f"/v1/tasks/{tid}/continue", json=cb)
                if r is not None and r.status_code != 200: anomaly("task_continue", f"status {r.status_code}", cb, r.text[:800])
                else: wait_finished(c, tid)
        elif a < 0.6:
            fb = {"prompt": f"\n\nUser: {words(5)}\n\nAssistant:", **gen_params()}
            if random.random() < 0.5: fb["seed"] = None
            tmpf = random.choice(["true", "false"])
            r = call(c, "POST", f"/v1/tasks/{tid}/fork?tmp={tmpf}", json=fb)
            if r is not None and r.status_code != 200: anomaly("task_fork", f"status {r.status_code}", fb, r.text[:800])
            elif r is not None:
                fid = r.json()["task_id"]
                wait_finished(c, fid)
                call(c, "GET", f"/v1/tasks/{fid}/get_result")
                if fid.startswith("TASK_") and random.random() < 0.7: call(c, "POST", f"/v1/tasks/{fid}/delete")
        elif a < 0.75:
            r = call(c, "GET", f"/v1/tasks/{tid}/export_state")
            if r is not None and r.status_code == 200:
                nm = f"imp{random.randint(0, 10**9)}"
                r2 = call(c, "POST", f"/v1/tasks/import_state?name={nm}", content=r.content, headers={"content-type": "application/octet-stream"})
                if r2 is not None and r2.status_code != 200: anomaly("import_state", f"status {r2.status_code}", nm, r2.text[:800])
                elif r2 is not None:
                    r3 = call(c, "POST", f"/v1/tasks/_{nm}/fork?tmp=true", json={"prompt": "\n\nUser: hi\n\nAssistant:", "max_tokens": 10})
                    if r3 is not None and r3.status_code != 200: anomaly("import_fork", f"status {r3.status_code}", nm, r3.text[:800])
                    call(c, "POST", f"/v1/tasks/_{nm}/delete?force=true")
            elif r is not None: anomaly("export_state", f"status {r.status_code}", tid, r.text[:500])
        elif a < 0.85:
            nm = f"tp{random.randint(0, 10**9)}" if random.random() < 0.5 else None
            r = call(c, "POST", f"/v1/tasks/{tid}/as_template" + (f"?name={nm}" if nm else ""))
            if r is not None and r.status_code == 200:
                t = r.json()["task_id"]
                head(c, "/v1/models")
                r2 = call(c, "POST", "/v1/chat/completions", json={"model": f"rwkv-7:{t}", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
                if r2 is not None and r2.status_code != 200: anomaly("as_template_chat", f"status {r2.status_code}", t, r2.text[:800])
                call(c, "POST", f"/v1/tasks/{t}/delete?force=true")
                return
            elif r is not None: anomaly("as_template", f"status {r.status_code}", tid, r.text[:500])
        else:
            res = read_task_stream(c, tid, random.choice([None, 0, 2, 5]))
            if res and res[0] == 200 and not res[2]: anomaly("task_get_stream_finished", "no [DONE]", tid, res[1][-3:])
    if random.random() < 0.6:
        r = call(c, "POST", f"/v1/tasks/{tid}/delete")
        if r is not None and r.status_code != 200: anomaly("task_delete", f"status {r.status_code}", tid, r.text[:500])
    else:
        with lock: KEPT.append(tid)

KEPT = []

def k_fim(c):
    b = {"prefix": "def " + random.choice(WORDS) + "(x):\n    ", "suffix": "\n    return y\n", **gen_params()}
    if random.random() < 0.3:
        b["stream"] = True
        res = stream_call(c, "POST", "/v1/tasks/fim", json=b)
        if res and res[0] != 200: anomaly("fim", f"status {res[0]}", b, res[1])
        elif res and not res[2]: anomaly("fim", "no [DONE]", b, res[1][-3:])
    else:
        r = call(c, "POST", "/v1/tasks/fim", json=b)
        if r is not None and r.status_code != 200: anomaly("fim", f"status {r.status_code}", b, r.text[:800])

def k_list(c):
    q = random.choice(["", "?limit=5", "?offset=3&limit=10", "?order=id&limit=20", "?after=TASK_0&limit=5"])
    r = call(c, "GET", "/v1/tasks/list" + q)
    if r is not None and r.status_code != 200: anomaly("list", f"status {r.status_code}", q, r.text[:500])

def k_head(c):
    p = random.choice(["/health", "/v1/models", "/health", "/v1/models"])
    r = head(c, p)
    if r is not None and r.status_code != 200: anomaly("HEAD", f"{p} {r.status_code}")
    if random.random() < 0.5:
        # HEAD on a running task's stream and status
        r = call(c, "POST", "/v1/tasks/tmp", json={"prompt": f"User: {words(5)}\n\nAssistant:", "max_tokens": 200})
        if r is not None and r.status_code == 200:
            tid = r.json()["task_id"]
            for p in (f"/v1/tasks/{tid}/stream", f"/v1/tasks/{tid}/status", f"/v1/tasks/{tid}/stream?pos=3"):
                rr = head(c, p)
                if rr is not None and rr.status_code not in (200, 404): anomaly("HEAD", f"{p} {rr.status_code}")
            if random.random() < 0.5: call(c, "POST", f"/v1/tasks/{tid}/stop")

MALFORMED = [
    ("POST", "/v1/chat/completions", "NOTJSON{", (400, 422)),
    ("POST", "/v1/completions", "[1,2", (400, 422)),
    ("POST", "/v1/tasks/create", "{bad", (400, 422)),
    ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": "hi"}, (400, 422)),
    ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "max_tokens": "lots"}, (400, 422)),
    ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "n": 0}, (400, 422)),
    ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "temperature": -1}, (400, 422)),
    ("POST", "/v1/chat/completions", {"model": "rwkv-7:_no_such_tpl", "messages": [{"role": "user", "content": "x"}]}, (404,)),
    ("POST", "/v1/completions", {"model": "rwkv-7", "prompt": 5}, (400, 422)),
    ("POST", "/v1/tasks/create", {"prompt": "x", "max_tokens": "5"}, (422,)),
    ("POST", "/v1/tasks/create", {"prompt": "x", "stream": 1}, (422,)),
    ("POST", "/v1/tasks/tmp", {"prompt": "x", "bogus": True}, (422,)),
    ("GET", "/v1/tasks/TASK_doesnotexist/status", None, (404,)),
    ("GET", "/v1/tasks/TASK_doesnotexist/get_result", None, (404,)),
    ("GET", "/v1/tasks/TASK_doesnotexist/stream", None, (404,)),
    ("HEAD", "/v1/tasks/TASK_doesnotexist/stream", None, (404,)),
    ("POST", "/v1/tasks/TASK_doesnotexist/fork", {"prompt": "x"}, (404,)),
    ("POST", "/v1/tasks/TASK_doesnotexist/continue", {"prompt": "x"}, (404,)),
    ("POST", "/v1/tasks/TASK_doesnotexist/stop", None, (404,)),
    ("POST", "/v1/tasks/TASK_doesnotexist/delete", None, (404,)),
    ("POST", "/v1/tasks/TASK_doesnotexist/as_template", None, (404,)),
    ("GET", "/v1/tasks/TASK_doesnotexist/export_state", None, (404,)),
    ("POST", "/v1/tasks/import_state?name=junk", b"not a state file", (400, 422)),
    ("POST", "/v1/tasks/fim", {"prefix": 3, "suffix": "x"}, (422,)),
]
def k_malformed(c):
    m, p, body, exp = random.choice(MALFORMED)
    kw = {}
    if isinstance(body, (str, bytes)): kw = {"content": body, "headers": {"content-type": "application/json"}}
    elif body is not None: kw = {"json": body}
    r = call(c, m, p, label=f"MALFORMED {m} {p.split('?')[0]}", **kw)
    if r is not None and r.status_code not in exp: anomaly("malformed", f"{m} {p} expected {exp} got {r.status_code}", body if not isinstance(body, bytes) else "bytes", r.text[:500])

KINDS = [(k_chat, 25), (k_multiturn, 8), (k_template_chat, 6), (k_completion, 14), (k_task_flow, 22), (k_fim, 4),
         (k_list, 3), (k_head, 8), (k_malformed, 4)]
FN = [k for k, w in KINDS for _ in range(w)]

def worker(i):
    c = httpx.Client(timeout=TIMEOUT)
    while time.time() < STOP:
        fn = random.choice(FN)
        try:
            fn(c)
        except Exception as e:
            with lock: codes[(fn.__name__, "EXC:" + type(e).__name__)] += 1
            anomaly(fn.__name__, "client exception " + repr(e)[:300], None, traceback.format_exc()[-1500:])

def rss_mb():
    try:
        for l in open(f"/proc/{PID}/status"):
            if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
    except Exception: return None

def log_errors():
    n_err = n_tb = 0
    try:
        with open(LOG, errors="replace") as f:
            for l in f:
                if "| ERROR" in l or " ERROR " in l: n_err += 1
                if "Traceback" in l: n_tb += 1
    except Exception: pass
    return n_err, n_tb

MON = open(f"{OUT}/monitor.jsonl", "a")
def snapshot(label):
    t_h = time.time()
    try: h = httpx.get(BASE + "/health", timeout=30).json()
    except Exception as e: h = {"err": repr(e)}
    hdt = time.time() - t_h
    pc = h.get("prefix_cache") or {}
    e, tb = log_errors()
    with lock:
        n5 = len(fivexx); nt = len(timeouts); ns = len(slow); na = len(anoms); nreq = sum(codes.values())
    s = {"t": round(time.time() - T0), "label": label, "rss_mb": rss_mb(), "health_s": round(hdt, 3),
         "status": h.get("status"), "scheduler_alive": h.get("scheduler_alive"), "queue": h.get("queue"), "active": h.get("active"),
         "finishing": h.get("finishing"), "scoring": h.get("scoring"), "capacity": h.get("capacity"),
         "task_store": h.get("task_store"), "pc_bytes_mb": round((pc.get("bytes") or 0) / 2**20, 1), "pc_entries": pc.get("entries"),
         "pc_hit_rate": pc.get("hit_rate"), "pc_evictions": pc.get("evictions"),
         "requests": nreq, "5xx": n5, "timeouts": nt, "slow30": ns, "anomalies": na, "log_ERROR": e, "log_Traceback": tb, "err": h.get("err")}
    MON.write(json.dumps(s) + "\n"); MON.flush()
    print(json.dumps(s), flush=True)

def setup_templates():
    c = httpx.Client(timeout=TIMEOUT)
    for name in ["soak_a", "soak_b", "soak_c", "soak_d"]:
        r = c.post(BASE + "/v1/tasks/create", json={"prompt": f"User: You are {name}. {words(15)}\n\nAssistant: OK.\n\n", "max_tokens": 0})
        tid = r.json()["task_id"]
        r = c.post(BASE + f"/v1/tasks/{tid}/as_template?name={name}")
        print("template", name, r.status_code, r.text[:200], flush=True)
        if r.status_code == 200: TEMPLATES.append(r.json()["task_id"])
        elif r.status_code == 409: TEMPLATES.append("_" + name)
    # a stored non-tmp task for the restart check
    r = c.post(BASE + "/v1/tasks/create", json={"prompt": "User: restart check\n\nAssistant:", "max_tokens": 20, "seed": 7, "temperature": 0})
    tid = r.json()["task_id"]
    while c.get(BASE + f"/v1/tasks/{tid}/status").json()["status"] != 3: time.sleep(0.2)
    g = c.get(BASE + f"/v1/tasks/{tid}/get_result").json()
    json.dump({"templates": TEMPLATES, "task": tid, "result": g}, open(f"{OUT}/restart_ref.json", "w"))
    print("restart ref", tid, g, flush=True)

T0 = time.time()
setup_templates()
snapshot("start")
STOP = time.time() + DUR
ths = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(NW)]
for t in ths: t.start()
nxt = time.time() + 60
while any(t.is_alive() for t in ths):
    time.sleep(1)
    if time.time() >= nxt:
        snapshot("load"); nxt += 60
snapshot("end_load")
for i in range(3):
    time.sleep(10); snapshot(f"idle+{10*(i+1)}s")
with lock:
    summary = {"codes": {f"{k}|{c}": n for (k, c), n in sorted(codes.items(), key=str)},
               "lat": {k: {"n": len(v), "p50": round(sorted(v)[len(v)//2], 3), "max": round(max(v), 3)} for k, v in sorted(lat.items())},
               "checks": dict(checks), "n5xx": len(fivexx), "timeouts": timeouts, "slow": slow, "anomalies": len(anoms), "kept": KEPT[:50]}
json.dump(summary, open(f"{OUT}/summary.json", "w"), indent=1)
print("DONE", json.dumps({"n5xx": len(fivexx), "timeouts": len(timeouts), "anomalies": len(anoms)}), flush=True)
