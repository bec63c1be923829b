import httpx, json, random, threading, time, sys, os, collections, statistics, traceback
import jsonschema_rs
BASE = "http://127.0.0.1:8795"
DUR = float(sys.argv[1]) if len(sys.argv) > 1 else 1200
NCLI = int(sys.argv[2]) if len(sys.argv) > 2 else 12
PID = int(sys.argv[3])
OUT = "/tmp/soak46/qa"
lock = threading.Lock()
lat = collections.defaultdict(list)
codes = collections.Counter()          # (kind, code)
validations = collections.Counter()    # (kind, result)
anoms = []
ANOM = open(f"{OUT}/anomalies.jsonl", "a")
def anomaly(kind, req, what, resp=None):
    rec = {"t": time.time(), "kind": kind, "what": what, "req": req, "resp": resp}
    with lock:
        anoms.append(rec); ANOM.write(json.dumps(rec)[:20000] + "\n"); ANOM.flush()
def rec(kind, code, dt):
    with lock:
        codes[(kind, code)] += 1
        if code == 200: lat[kind].append(dt)
def val(kind, res):
    with lock: validations[(kind, res)] += 1

SCHEMA = {"type": "object", "properties": {
    "color": {"enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"},
    "name": {"type": "string", "maxLength": 12}, "n": {"type": "integer", "minimum": 0, "maximum": 100}},
    "required": ["color", "ok", "name"], "additionalProperties": False}
SV = jsonschema_rs.validator_for(SCHEMA)
RF = {"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA}}
W_PARAMS = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
    "unit": {"enum": ["c", "f"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit"], "additionalProperties": False}
T_PARAMS = {"type": "object", "properties": {"tz": {"enum": ["UTC", "CET", "PST"]}, "h24": {"type": "boolean"}},
    "required": ["tz"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": W_PARAMS}},
         {"type": "function", "function": {"name": "get_time", "parameters": T_PARAMS}}]
TV = {"get_weather": jsonschema_rs.validator_for(W_PARAMS), "get_time": jsonschema_rs.validator_for(T_PARAMS)}
WORDS = "alpha beta gamma delta river mountain cloud quick brown fox jumps over lazy dog weather time".split()
def words(n): return " ".join(random.choice(WORDS) for _ in range(n))
def msgs(): return [{"role": "user", "content": words(random.randint(3, 30))}]

def check_json(kind, text, req, resp):
    try: obj = json.loads(text)
    except Exception as e:
        val(kind, "parse_fail"); anomaly(kind, req, f"JSON parse failed with finish stop: {e}", resp); return
    errs = [str(e) for e in SV.iter_errors(obj)]
    if errs: val(kind, "schema_fail"); anomaly(kind, req, f"schema errors {errs}", resp)
    else: val(kind, "ok")

def sse_iter(r):
    for line in r.iter_lines():
        if line.startswith("data: "):
            d = line[6:]
            if d == "[DONE]": yield None; return
            yield json.loads(d)

def do_chat(c, kind, body, validate=None):
    stream = body.get("stream", False)
    disconnect = stream and random.random() < 0.10
    t0 = time.time()
    if not stream:
        r = c.post(f"{BASE}/v1/chat/completions", json=body)
        dt = time.time() - t0; rec(kind, r.status_code, dt)
        if r.status_code != 200:
            anomaly(kind, body, f"status {r.status_code}", r.text[:2000]); return
        j = r.json()
        if validate: validate(j["choices"][0], body, j)
        return
    kk = kind + ("_disc" if disconnect else "")
    with c.stream("POST", f"{BASE}/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            r.read(); rec(kk, r.status_code, time.time() - t0); anomaly(kk, body, f"status {r.status_code}", r.text[:2000]); return
        content = ""; finish = None; tcs = {}; done = False; n = 0; err = None
        for ev in sse_iter(r):
            if ev is None: done = True; break
            if "error" in ev: err = ev; continue
            n += 1
            if disconnect and n >= random.randint(2, 6): break
            for ch in ev.get("choices", []):
                d = ch.get("delta", {})
                content += d.get("content") or ""
                for tc in d.get("tool_calls") or []:
                    e = tcs.setdefault(tc.get("index", 0), {"name": "", "arguments": ""})
                    f = tc.get("function", {})
                    e["name"] += f.get("name") or ""; e["arguments"] += f.get("arguments") or ""
                if ch.get("finish_reason"): finish = ch["finish_reason"]
    dt = time.time() - t0; rec(kk, 200, dt)
    if disconnect: return
    if err: anomaly(kind, body, "stream error event", err)
    if not done: anomaly(kind, body, "stream ended without [DONE]", {"content": content, "finish": finish})
    if finish is None: anomaly(kind, body, "stream had no finish_reason", {"content": content})
    if validate:
        msg = {"content": content, "tool_calls": [{"function": v} for v in tcs.values()] or None}
        validate({"message": msg, "finish_reason": finish}, body, {"stream": True, "content": content, "tcs": tcs, "finish": finish})

def v_schema(kind):
    def f(choice, body, resp):
        fr = choice["finish_reason"]
        if fr == "stop": check_json(kind, choice["message"]["content"], body, resp)
        elif fr == "length": val(kind, "length(unchecked)")
        else: val(kind, f"finish_{fr}"); anomaly(kind, body, f"unexpected finish_reason {fr}", resp)
    return f
def v_tool(kind):
    def f(choice, body, resp):
        fr = choice["finish_reason"]; m = choice["message"]
        if fr == "length": val(kind, "length(unchecked)"); return
        tcs = m.get("tool_calls") or []
        if fr != "tool_calls" or len(tcs) != 1:
            val(kind, "bad_shape"); anomaly(kind, body, f"finish {fr}, {len(tcs)} tool calls", resp); return
        fn = tcs[0]["function"]; name = fn.get("name")
        forced = body.get("tool_choice")
        if isinstance(forced, dict) and name != forced["function"]["name"]:
            val(kind, "wrong_name"); anomaly(kind, body, f"forced {forced} got {name}", resp); return
        if name not in TV: val(kind, "unknown_fn"); anomaly(kind, body, f"unknown function {name}", resp); return
        try: args = json.loads(fn["arguments"])
        except Exception as e: val(kind, "args_parse_fail"); anomaly(kind, body, f"args parse {e}", resp); return
        errs = [str(e) for e in TV[name].iter_errors(args)]
        if errs: val(kind, "args_schema_fail"); anomaly(kind, body, f"args schema {errs}", resp)
        else: val(kind, "ok")
    return f

def k_chat(c):
    b = {"model": "rwkv-7", "messages": msgs(), "max_tokens": random.randint(8, 64), "stream": random.random() < 0.5,
         "temperature": random.choice([0, 0.7, 1.0])}
    if random.random() < 0.7: b["reasoning_effort"] = "none"
    do_chat(c, "chat_stream" if b["stream"] else "chat", b)
def k_schema(c):
    b = {"model": "rwkv-7", "messages": msgs(), "max_tokens": 80, "stream": random.random() < 0.5,
         "response_format": RF, "temperature": random.choice([0, 1.0, 1.5])}
    do_chat(c, "chat_schema", b, v_schema("chat_schema"))
def k_tool(c):
    tc = random.choice(["required", "required", {"type": "function", "function": {"name": "get_time"}}])
    b = {"model": "rwkv-7", "messages": msgs(), "max_tokens": 80, "stream": random.random() < 0.5,
         "tools": TOOLS, "tool_choice": tc, "temperature": random.choice([0.5, 1.0, 1.5])}
    do_chat(c, "chat_tool", b, v_tool("chat_tool"))
def k_bias(c):
    tok = random.randint(100, 60000)
    b = {"model": "rwkv-7", "prompt": words(8), "max_tokens": 12, "logit_bias": {str(tok): 100},
         "presence_penalty": 0, "frequency_penalty": 0, "temperature": 1.0, "logprobs": 1}
    t0 = time.time(); r = c.post(f"{BASE}/v1/completions", json=b); rec("logit_bias", r.status_code, time.time() - t0)
    if r.status_code != 200: anomaly("logit_bias", b, f"status {r.status_code}", r.text[:2000]); return
    ch = r.json()["choices"][0]; toks = ch["logprobs"]["tokens"]
    if len(set(toks)) > 1: val("logit_bias", "not_forced"); anomaly("logit_bias", b, "bias 100 token not always chosen", ch)
    else: val("logit_bias", "ok")
def k_minp(c):
    p = words(6)
    outs = []
    for s in (random.randint(0, 10**6), random.randint(0, 10**6)):
        b = {"model": "rwkv-7", "prompt": p, "max_tokens": 10, "min_p": 1.0, "temperature": 1.0, "seed": s}
        t0 = time.time(); r = c.post(f"{BASE}/v1/completions", json=b); rec("min_p", r.status_code, time.time() - t0)
        if r.status_code != 200: anomaly("min_p", b, f"status {r.status_code}", r.text[:2000]); return
        outs.append(r.json()["choices"][0]["text"])
    if outs[0] != outs[1]: val("min_p", "nondeterministic"); anomaly("min_p", {"prompt": p}, "min_p=1 differs across seeds", outs)
    else: val("min_p", "ok")
def k_echo(c):
    b = {"model": "rwkv-7", "prompt": words(random.randint(3, 200)), "echo": True, "logprobs": random.randint(0, 5),
         "max_tokens": random.choice([0, 0, 5])}
    t0 = time.time(); r = c.post(f"{BASE}/v1/completions", json=b); rec("echo_logprobs", r.status_code, time.time() - t0)
    if r.status_code != 200: anomaly("echo_logprobs", b, f"status {r.status_code}", r.text[:2000]); return
    ch = r.json()["choices"][0]; lp = ch["logprobs"]
    ok = (len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["text_offset"]) == len(lp["top_logprobs"])
          and lp["token_logprobs"][0] is None and ch["text"].startswith(b["prompt"]) and "".join(lp["tokens"]).replace("bytes:", "") is not None)
    if not ok: val("echo_logprobs", "bad"); anomaly("echo_logprobs", b, "logprobs shape", ch)
    else: val("echo_logprobs", "ok")

def task_round(c, kind, url, body):
    t0 = time.time()
    with c.stream("POST", url, json=body) as r:
        if r.status_code != 200:
            r.read(); rec(kind, r.status_code, time.time() - t0); anomaly(kind, body, f"status {r.status_code} {url}", r.text[:2000]); return None
        tid = None; text = ""; done = False
        for ev in sse_iter(r):
            if ev is None: done = True; break
            if "error" in ev: anomaly(kind, body, "task stream error", ev)
            tid = ev.get("task_id", tid); text += ev.get("data", "") or ""
    rec(kind, 200, time.time() - t0)
    if not done: anomaly(kind, body, "task stream no [DONE]", text)
    st = c.get(f"{BASE}/v1/tasks/{tid}/status").json()
    gr = c.get(f"{BASE}/v1/tasks/{tid}/get_result").json()
    if gr.get("result") != text: anomaly(kind, body, "get_result != streamed text", {"stream": text, "gr": gr})
    if "response_format" in body:
        ntok = st.get("tokens") or st.get("generated") or st.get("tokens_generated")
        try: json.loads(text); check_json(kind, text, body, {"text": text, "status": st})
        except Exception:
            mt = body.get("max_tokens")
            if isinstance(ntok, int) and mt and ntok >= mt: val(kind, "length(unchecked)")
            else: val(kind, "parse_fail?"); anomaly(kind, body, "task JSON unparsable (not at max_tokens?)", {"text": text, "status": st})
    return tid
def k_task(c):
    p = f"User: {words(10)}\n\nAssistant:"
    tid = task_round(c, "task_create", f"{BASE}/v1/tasks/create",
                     {"prompt": p, "max_tokens": 80, "stream": True, "response_format": RF, "temperature": 1.0})
    if not tid: return
    task_round(c, "task_continue", f"{BASE}/v1/tasks/{tid}/continue",
               {"prompt": f"\n\nUser: {words(5)}\n\nAssistant:", "max_tokens": 80, "stream": True, "response_format": RF})
    fid = task_round(c, "task_fork", f"{BASE}/v1/tasks/{tid}/fork?tmp={random.choice(['true','false'])}",
                     {"prompt": f"\n\nUser: {words(5)}\n\nAssistant:", "max_tokens": 80, "stream": True, "response_format": RF, "seed": None})
    for t in (tid, fid):
        if t and t.startswith("TASK_"):
            r = c.post(f"{BASE}/v1/tasks/{t}/delete"); rec("task_delete", r.status_code, 0)
            if r.status_code != 200: anomaly("task_delete", t, f"status {r.status_code}", r.text[:500])
INVALID = [
    ("/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "logit_bias": {"5": 200}}, 400),
    ("/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "logit_bias": {"99999999": 1}}, 400),
    ("/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "min_p": 2}, 400),
    ("/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}}, 400),
    ("/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}}, 400),
    ("/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}, 400),
    ("/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "tools": TOOLS, "tool_choice": "required", "response_format": RF}, 400),
    ("/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}], "tool_choice": "required"}, 400),
    ("/v1/completions", {"model": "rwkv-7", "prompt": "x", "logprobs": True}, 400),
    ("/v1/tasks/create", {"prompt": "x", "max_tokens": 5, "bogus": 1}, 422),
    ("/v1/tasks/create", {"prompt": "x", "max_tokens": "5"}, 422),
    ("/v1/tasks/create", {"prompt": "x", "max_tokens": 5, "response_format": {"type": "json_schema"}}, 422),
    ("/v1/chat/completions", "NOTJSON{", None),
]
def k_invalid(c):
    path, body, exp = random.choice(INVALID)
    t0 = time.time()
    if isinstance(body, str): r = c.post(f"{BASE}{path}", content=body, headers={"Content-Type": "application/json"})
    else: r = c.post(f"{BASE}{path}", json=body)
    rec("invalid", r.status_code, time.time() - t0)
    if (exp is not None and r.status_code != exp) or (exp is None and r.status_code not in (400, 422)) :
        anomaly("invalid", {"path": path, "body": body}, f"expected {exp} got {r.status_code}", r.text[:1000])

KINDS = [(k_chat, 25), (k_schema, 15), (k_tool, 15), (k_bias, 8), (k_minp, 6), (k_echo, 10), (k_task, 10), (k_invalid, 5)]
FN = [k for k, w in KINDS for _ in range(w)]
stop_at = time.time() + DUR
def worker(i):
    c = httpx.Client(timeout=120)
    while time.time() < stop_at:
        fn = random.choice(FN)
        try: fn(c)
        except Exception as e:
            rec(fn.__name__, "EXC:" + type(e).__name__, 0)
            anomaly(fn.__name__, None, "client exception " + repr(e)[:500], traceback.format_exc()[-1500:])

def pct(a, q):
    if not a: return None
    a = sorted(a); return round(a[min(len(a) - 1, int(q * len(a)))], 3)
def rss():
    for l in open(f"/proc/{PID}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
MON = open(f"{OUT}/monitor.jsonl", "a")
def snapshot(label):
    try: h = httpx.get(f"{BASE}/health", timeout=10).json()
    except Exception as e: h = {"err": repr(e)}
    with lock:
        s = {"t": round(time.time() - T0), "label": label, "rss_mb": rss(),
             "health": {k: h.get(k) for k in ("status", "active", "queue", "finishing", "scoring", "scheduler_alive")},
             "codes": {f"{k}|{c}": n for (k, c), n in sorted(codes.items(), key=str)},
             "lat": {k: {"n": len(v), "p50": pct(v, .5), "p95": pct(v, .95)} for k, v in sorted(lat.items())},
             "validations": {f"{k}|{r}": n for (k, r), n in sorted(validations.items())}, "anomalies": len(anoms)}
    MON.write(json.dumps(s) + "\n"); MON.flush()
    print(json.dumps({k: s[k] for k in ("t", "rss_mb", "health", "anomalies")}), flush=True)
T0 = time.time()
snapshot("start")
ths = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(NCLI)]
for t in ths: t.start()
while any(t.is_alive() for t in ths):
    time.sleep(30 if time.time() + 30 < stop_at + 200 else 5); snapshot("load")
snapshot("end_load")
for i in range(12):
    time.sleep(5); snapshot(f"idle+{5*(i+1)}s")
