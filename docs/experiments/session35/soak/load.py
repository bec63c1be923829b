"""Mixed soak load. usage: load.py DURATION_S WORKERS LOGFILE"""
import asyncio, json, random, sys, time, traceback
import httpx

BASE = "http://127.0.0.1:8792"
DURATION, WORKERS, LOG = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
import os; random.seed(int(os.environ.get("SOAK_SEED", "35")))
T0 = time.time()
stats = {}          # scenario -> {status: count}
errors = []         # unexpected outcomes
logf = open(LOG, "a")
templates = []      # our templates
abandoned = []      # create-and-abandon ids

WORDS = "apple river cloud stone quick lazy bright ocean mountain signal vector kernel batch token".split()

def words(n):
    return " ".join(random.choice(WORDS) for _ in range(n))

def rec(name, status, note=""):
    d = stats.setdefault(name, {})
    d[status] = d.get(status, 0) + 1
    if (isinstance(status, int) and status >= 500) or status in ("EXC",):
        line = f"{time.time()-T0:.1f} {name} {status} {note[:800]}"
        errors.append(line)
        logf.write("UNEXPECTED " + line + "\n"); logf.flush()

def phase():
    f = (time.time() - T0) / DURATION
    return 0 if f < 1/3 else (1 if f < 2/3 else 2)

def chat_body(**kw):
    b = {"model": "rwkv-7", "max_tokens": random.choice([8, 16, 32, 48]),
         "messages": [{"role": "user", "content": words(random.randint(3, 30))}]}
    if random.random() < 0.5:
        b["reasoning_effort"] = "none"
    if random.random() < 0.3:
        b["stop"] = random.choice(["\n", ["apple", "the"], "a", ["x", "y", "z", "q"]])
    if random.random() < 0.3:
        b["temperature"] = random.choice([0, 0.5, 1.2]); b["top_p"] = random.choice([0.1, 0.9])
    if random.random() < 0.2:
        b["seed"] = random.randint(0, 1000)
    b.update(kw)
    return b

async def sse_read(resp, max_chunks=None):
    n = 0; done = False; err = None; text = []
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            done = True; break
        n += 1
        try:
            j = json.loads(payload)
            if "error" in j:
                err = j["error"]
        except Exception:
            pass
        if max_chunks and n >= max_chunks:
            break
    return n, done, err

# ---------------- scenarios ----------------
async def s_chat(c):
    b = chat_body(n=random.choice([1, 1, 2, 3]))
    r = await c.post(BASE + "/v1/chat/completions", json=b, timeout=120)
    rec("chat", r.status_code, r.text if r.status_code >= 500 else "")
    if r.status_code == 200:
        j = r.json()
        if len(j["choices"]) != b["n"]:
            rec("chat_bad_n", "WRONG", json.dumps(b))

async def s_chat_stream(c):
    b = chat_body(stream=True, n=random.choice([1, 2]), stream_options={"include_usage": True})
    async with c.stream("POST", BASE + "/v1/chat/completions", json=b, timeout=120) as r:
        if r.status_code != 200:
            await r.aread(); rec("chat_stream", r.status_code, r.text); return
        n, done, err = await sse_read(r)
        rec("chat_stream", 200 if done and not err else "NODONE", json.dumps(b) + str(err))

async def s_chat_disconnect(c):
    b = chat_body(stream=True, max_tokens=400, n=random.choice([1, 2]))
    async with c.stream("POST", BASE + "/v1/chat/completions", json=b, timeout=120) as r:
        if r.status_code != 200:
            await r.aread(); rec("chat_disc", r.status_code, r.text); return
        await sse_read(r, max_chunks=random.randint(1, 4))
    rec("chat_disc", "closed")

async def s_chat_timeout(c):
    b = chat_body(max_tokens=1500, n=random.choice([1, 2]))
    b.pop("stop", None)
    try:
        r = await c.post(BASE + "/v1/chat/completions", json=b, timeout=random.choice([0.2, 0.5, 1.0]))
        rec("chat_timeout", r.status_code, r.text if r.status_code >= 500 else "")
    except httpx.TimeoutException:
        rec("chat_timeout", "timeout")

async def s_conversation(c):
    msgs = [{"role": "system", "content": "You are a soak test bot. " + words(10)}]
    stream = random.random() < 0.5
    for turn in range(random.randint(3, 10)):
        msgs.append({"role": "user", "content": words(random.randint(5, 40))})
        b = {"model": "rwkv-7", "messages": msgs, "max_tokens": 24, "reasoning_effort": "none",
             "temperature": 0.7, "stream": stream}
        if stream:
            reply = []
            async with c.stream("POST", BASE + "/v1/chat/completions", json=b, timeout=120) as r:
                if r.status_code != 200:
                    await r.aread(); rec("conv", r.status_code, r.text); return
                async for line in r.aiter_lines():
                    if line.startswith("data:") and line[5:].strip() != "[DONE]":
                        j = json.loads(line[5:])
                        for ch in j.get("choices", []):
                            reply.append(ch.get("delta", {}).get("content") or "")
            rec("conv", 200); content = "".join(reply)
        else:
            r = await c.post(BASE + "/v1/chat/completions", json=b, timeout=120)
            rec("conv", r.status_code, r.text if r.status_code >= 500 else "")
            if r.status_code != 200:
                return
            content = r.json()["choices"][0]["message"]["content"] or "ok"
        msgs.append({"role": "assistant", "content": content or "ok"})

async def s_completions(c):
    stream = random.random() < 0.4
    b = {"model": "rwkv-7", "prompt": random.choice([words(20), [words(5), words(8)]]),
         "max_tokens": random.choice([8, 24]), "stream": stream}
    if random.random() < 0.3:
        b["suffix"] = words(6); b["prompt"] = words(10)
    if random.random() < 0.3:
        b["stop"] = ["\n\n"]
    if random.random() < 0.3:
        b["n"] = 2
    if stream:
        async with c.stream("POST", BASE + "/v1/completions", json=b, timeout=120) as r:
            if r.status_code != 200:
                await r.aread(); rec("compl_stream", r.status_code, r.text); return
            n, done, err = await sse_read(r)
            rec("compl_stream", 200 if done and not err else "NODONE", json.dumps(b) + str(err))
    else:
        r = await c.post(BASE + "/v1/completions", json=b, timeout=120)
        rec("compl", r.status_code, (json.dumps(b) + r.text) if r.status_code >= 500 else "")

async def poll(c, tid, limit=60):
    t = time.time()
    while time.time() - t < limit:
        r = await c.get(f"{BASE}/v1/tasks/{tid}/get_result", timeout=30)
        if r.status_code != 200:
            return r.status_code, r.text
        if r.json()["finished"]:
            return 200, r.json()
        await asyncio.sleep(0.2)
    return "POLL_TIMEOUT", None

def tparams(**kw):
    b = {"prompt": words(random.randint(5, 40)), "max_tokens": random.choice([8, 16, 32])}
    if random.random() < 0.3:
        b["temperature"] = 0.5
    if random.random() < 0.3:
        b["seed"] = random.randint(0, 99)
    b.update(kw)
    return b

async def s_tmp(c):
    if random.random() < 0.5:
        async with c.stream("POST", BASE + "/v1/tasks/tmp", json=tparams(stream=True), timeout=120) as r:
            if r.status_code != 200:
                await r.aread(); rec("tmp_stream", r.status_code, r.text); return
            if random.random() < 0.3:
                await sse_read(r, max_chunks=2); rec("tmp_stream", "disc"); return
            n, done, err = await sse_read(r)
            rec("tmp_stream", 200 if done and not err else "NODONE", str(err))
    else:
        r = await c.post(BASE + "/v1/tasks/tmp", json=tparams(), timeout=60)
        rec("tmp", r.status_code, r.text if r.status_code >= 500 else "")
        if r.status_code == 200:
            st, _ = await poll(c, r.json()["task_id"])
            rec("tmp_poll", st, str(_))

async def s_create_delete(c):
    r = await c.post(BASE + "/v1/tasks/create", json=tparams(), timeout=60)
    rec("create", r.status_code, r.text if r.status_code >= 500 else "")
    if r.status_code != 200:
        return
    tid = r.json()["task_id"]
    st, _ = await poll(c, tid); rec("create_poll", st, str(_))
    r = await c.post(f"{BASE}/v1/tasks/{tid}/continue", json={"prompt": words(5), "max_tokens": 8}, timeout=60)
    rec("continue", r.status_code, r.text if r.status_code >= 500 else "")
    if r.status_code == 200:
        st, _ = await poll(c, tid); rec("continue_poll", st, str(_))
    r = await c.get(f"{BASE}/v1/tasks/{tid}/status", timeout=30); rec("status", r.status_code, r.text)
    if random.random() < 0.3:  # re-read stream from a position, disconnect early
        async with c.stream("GET", f"{BASE}/v1/tasks/{tid}/stream", params={"pos": 2}, timeout=60) as s:
            await sse_read(s, max_chunks=1 if random.random() < 0.5 else None)
        rec("restream", s.status_code)
    r = await c.post(f"{BASE}/v1/tasks/{tid}/delete", timeout=30); rec("delete", r.status_code, r.text)

async def s_create_abandon(c):
    stream = random.random() < 0.3
    if stream:
        async with c.stream("POST", BASE + "/v1/tasks/create", json=tparams(stream=True, max_tokens=64), timeout=60) as r:
            await sse_read(r, max_chunks=2)
        rec("abandon_stream", r.status_code)
    else:
        r = await c.post(BASE + "/v1/tasks/create", json=tparams(), timeout=60)
        rec("abandon", r.status_code, r.text if r.status_code >= 500 else "")
        if r.status_code == 200:
            abandoned.append(r.json()["task_id"])

async def s_stop(c):
    r = await c.post(BASE + "/v1/tasks/create", json=tparams(max_tokens=2000), timeout=60)
    rec("create_long", r.status_code, r.text if r.status_code >= 500 else "")
    if r.status_code != 200:
        return
    tid = r.json()["task_id"]
    await asyncio.sleep(random.uniform(0.05, 1.0))
    r = await c.post(f"{BASE}/v1/tasks/{tid}/continue", json={"prompt": "x"}, timeout=30)
    rec("continue_running", r.status_code, r.text)   # 409 expected (or 200 if it already finished)
    r = await c.post(f"{BASE}/v1/tasks/{tid}/stop", timeout=30); rec("stop", r.status_code, r.text)
    st, _ = await poll(c, tid, 30); rec("stop_poll", st, str(_))
    if random.random() < 0.5:
        r = await c.post(f"{BASE}/v1/tasks/{tid}/delete", timeout=30); rec("delete", r.status_code, r.text)

async def s_template(c):
    # make a template occasionally, else fork an existing one
    if len(templates) < 6 or random.random() < 0.1:
        r = await c.post(BASE + "/v1/tasks/create", json={"prompt": "System: " + words(30) + "\n\n", "max_tokens": 0}, timeout=60)
        rec("tpl_prefill", r.status_code, r.text if r.status_code >= 500 else "")
        if r.status_code != 200:
            return
        tid = r.json()["task_id"]
        r = await c.post(f"{BASE}/v1/tasks/{tid}/as_template", timeout=30)
        rec("as_template", r.status_code, r.text)
        if r.status_code == 200:
            templates.append(r.json()["task_id"])
        r = await c.post(f"{BASE}/v1/tasks/{tid}/delete", timeout=30); rec("delete", r.status_code, r.text)
        return
    tpl = random.choice(templates)
    tmp = random.random() < 0.6
    stream = random.random() < 0.5
    b = {"prompt": "User: " + words(8) + "\n\nAssistant:", "max_tokens": 16, "seed": None}
    if stream:
        b["stream"] = True
        async with c.stream("POST", f"{BASE}/v1/tasks/{tpl}/fork", params={"tmp": str(tmp).lower()}, json=b, timeout=60) as r:
            if r.status_code != 200:
                await r.aread(); rec("fork_stream", r.status_code, r.text); return
            n, done, err = await sse_read(r)
            rec("fork_stream", 200 if done and not err else "NODONE", str(err))
    else:
        r = await c.post(f"{BASE}/v1/tasks/{tpl}/fork", params={"tmp": str(tmp).lower()}, json=b, timeout=60)
        rec("fork", r.status_code, r.text)
        if r.status_code == 200:
            fid = r.json()["task_id"]
            st, _ = await poll(c, fid); rec("fork_poll", st, str(_))
            if not tmp and random.random() < 0.7:
                r = await c.post(f"{BASE}/v1/tasks/{fid}/delete", timeout=30); rec("delete", r.status_code, r.text)
    # forking a template via the OpenAI route
    if random.random() < 0.3:
        r = await c.post(BASE + "/v1/chat/completions", timeout=60, json={
            "model": "rwkv-7:" + tpl, "max_tokens": 8, "messages": [{"role": "user", "content": words(4)}]})
        rec("chat_tpl", r.status_code, r.text if r.status_code >= 500 else "")
    # occasionally delete a template (force)
    if len(templates) > 10 and random.random() < 0.3:
        t = templates.pop(0)
        r = await c.post(f"{BASE}/v1/tasks/{t}/delete", params={"force": "true"}, timeout=30)
        rec("tpl_delete", r.status_code, r.text)

async def s_fim(c):
    r = await c.post(BASE + "/v1/tasks/fim", json={"prefix": "def f(x):\n    ", "suffix": "\n    return y\n", "max_tokens": 16}, timeout=60)
    rec("fim", r.status_code, r.text if r.status_code >= 500 else "")
    if r.status_code == 200:
        st, _ = await poll(c, r.json()["task_id"]); rec("fim_poll", st, str(_))

async def s_list(c):
    r = await c.get(BASE + "/v1/tasks/list", params={"offset": random.randint(0, 50), "limit": 20}, timeout=30)
    rec("list", r.status_code, r.text if r.status_code >= 500 else "")
    r = await c.get(BASE + "/v1/models", timeout=30); rec("models", r.status_code, r.text if r.status_code >= 500 else "")

async def s_state(c):
    if not templates:
        return
    r = await c.get(f"{BASE}/v1/tasks/{random.choice(templates)}/export_state", timeout=30)
    rec("export", r.status_code, r.text[:300] if r.status_code >= 500 else "")
    if r.status_code == 200 and random.random() < 0.5:
        name = f"_imp{random.randint(0, 10**9)}"
        r2 = await c.post(BASE + "/v1/tasks/import_state", params={"name": name}, content=r.content, timeout=30)
        rec("import", r2.status_code, r2.text)
        if r2.status_code == 200:
            r3 = await c.post(f"{BASE}/v1/tasks/{name}/delete", params={"force": "true"}, timeout=30)
            rec("tpl_delete", r3.status_code, r3.text)

BAD = [
    ("POST", "/v1/tasks/tmp", {"prompt": "x", "max_tokens": "3"}, 422),
    ("POST", "/v1/tasks/create", {"prompt": "x", "bogus": 1}, 422),
    ("POST", "/v1/tasks/create", {"prompt": "x", "max_tokens": 99999999}, 422),
    ("POST", "/v1/tasks/tmp", {"prompt": "x", "temperature": -1}, 422),
    ("POST", "/v1/tasks/tmp", {}, 422),
    ("GET", "/v1/tasks/TASK_00000000000000000000000000000000/get_result", None, 404),
    ("POST", "/v1/tasks/TASK_deadbeef/fork", {"prompt": "x"}, 404),
    ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": "notalist"}, 400),
    ("POST", "/v1/chat/completions", {"model": "rwkv-7"}, 400),
    ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "n": 0}, 400),
    ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "temperature": 9}, 400),
    ("POST", "/v1/chat/completions", {"model": "rwkv-7:_nope", "messages": [{"role": "user", "content": "x"}]}, 404),
    ("POST", "/v1/completions", {"model": "rwkv-7", "prompt": 5}, 400),
    ("POST", "/v1/completions", {"model": "rwkv-7", "prompt": "x", "max_tokens": -1}, 400),
    ("RAW", "/v1/chat/completions", b"{not json", 400),
    ("RAW", "/v1/tasks/create", b"{not json", 422),
    ("GET", "/v1/nonexistent/{rand}", None, 404),
    ("GET", "/v1/tasks/{rand}/status", None, 404),
]

async def s_bad(c):
    m, path, body, exp = random.choice(BAD)
    path = path.replace("{rand}", f"x{random.randint(0, 10**12)}")
    if m == "GET":
        r = await c.get(BASE + path, timeout=30)
    elif m == "RAW":
        r = await c.post(BASE + path, content=body, headers={"content-type": "application/json"}, timeout=30)
    else:
        r = await c.post(BASE + path, json=body, timeout=30)
    rec(f"bad {m} {path.split('/x')[0][:40]}", r.status_code, (str(body) + r.text) if r.status_code >= 500 else "")

SCEN = {  # name: weights per phase (0: OpenAI heavy, 1: Task API heavy, 2: everything)
    s_chat: (20, 4, 10), s_chat_stream: (15, 3, 8), s_chat_disconnect: (8, 2, 5), s_chat_timeout: (4, 1, 3),
    s_conversation: (8, 2, 5), s_completions: (10, 3, 6),
    s_tmp: (4, 15, 8), s_create_delete: (2, 12, 6), s_create_abandon: (2, 8, 5), s_stop: (1, 6, 3),
    s_template: (2, 15, 8), s_fim: (1, 4, 3), s_list: (1, 4, 3), s_state: (0, 2, 1), s_bad: (6, 6, 8),
}

async def worker(i, c):
    while time.time() - T0 < DURATION:
        ph = phase()
        fns = list(SCEN); ws = [SCEN[f][ph] for f in fns]
        fn = random.choices(fns, ws)[0]
        try:
            await fn(c)
        except httpx.TimeoutException as e:
            rec(fn.__name__, "CLIENT_TIMEOUT", repr(e))
            logf.write(f"TIMEOUT {time.time()-T0:.1f} {fn.__name__} {e!r}\n"); logf.flush()
        except Exception as e:
            rec(fn.__name__, "EXC", traceback.format_exc())

async def reporter():
    while time.time() - T0 < DURATION + 5:
        await asyncio.sleep(60)
        logf.write(f"--- {time.time()-T0:.0f}s phase {phase()} stats {json.dumps(stats)}\n"); logf.flush()

async def main():
    limits = httpx.Limits(max_connections=WORKERS, max_keepalive_connections=WORKERS)
    async with httpx.AsyncClient(limits=limits) as c:
        rt = asyncio.create_task(reporter())
        await asyncio.gather(*(worker(i, c) for i in range(WORKERS)))
        rt.cancel()
    logf.write(f"=== FINAL stats {json.dumps(stats, indent=1)}\nabandoned={len(abandoned)} templates={templates}\nerrors={len(errors)}\n")
    logf.close()
    json.dump({"stats": stats, "errors": errors, "abandoned": abandoned, "templates": templates},
              open(LOG + ".json", "w"), indent=1)

asyncio.run(main())
