"""Soak client for RWKV-Server: mixed load + sampling every ~30 s.

usage: python soak_client.py URL PID DURATION_S [CONCURRENCY]
"""
import asyncio, collections, csv, json, os, random, sys, time, traceback

import httpx

URL, PID, DURATION = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
CONC = int(sys.argv[4]) if len(sys.argv) > 4 else 6
DB = os.environ.get("SOAK_DB", "/tmp/soak/soak.db")
CSV = os.environ.get("SOAK_CSV", "/tmp/soak_samples.csv")
TIMEOUT = httpx.Timeout(120.0, connect=10.0)

stats = collections.Counter()          # kind -> count
codes = collections.Counter()          # (kind, status) -> count
problems = []                          # (t, kind, what)
templates = []                         # template ids we made
persistent = []                        # TASK_ ids we keep around
t0 = time.time()

WORDS = ("the quick brown fox jumps over lazy dog rwkv state cache token stream "
         "hello world what is a linear attention model tell me a story about "
         "日本語 中文 émoji 🙂 café naïve").split()


def words(n):
    return " ".join(random.choice(WORDS) for _ in range(n))


def sampling():
    d = {}
    if random.random() < 0.7: d["temperature"] = random.choice([0, 0.3, 0.7, 1.0, 1.5, 2.0])
    if random.random() < 0.5: d["top_p"] = random.choice([0.1, 0.3, 0.9, 1.0])
    if random.random() < 0.3: d["top_k"] = random.choice([0, 1, 5, 50])
    if random.random() < 0.5: d["seed"] = random.randint(0, 2**31)
    if random.random() < 0.2: d["presence_penalty"] = random.choice([0, 0.5, 2.0])
    return d


def note(kind, status):
    stats[kind] += 1
    codes[(kind, status)] += 1
    if isinstance(status, int) and status >= 500:
        problems.append((round(time.time() - t0), kind, f"HTTP {status}"))


def chat_body(messages, stream=False):
    b = {"model": "rwkv-7", "messages": messages,
         "max_tokens": random.choice([4, 8, 16, 32]), "stream": stream, **sampling()}
    if random.random() < 0.3: b["stop"] = random.choice(["\n", ["the", "a"], "e", ["xyz"]])
    if random.random() < 0.4: b["reasoning_effort"] = "none"
    if random.random() < 0.1: b["n"] = 2
    if stream and random.random() < 0.5: b["stream_options"] = {"include_usage": True}
    if random.random() < 0.05: b["response_format"] = {"type": "json_object"}
    if random.random() < 0.05: b["logprobs"] = True; b["top_logprobs"] = 2
    return b


async def read_sse(resp, limit=None):
    """Read SSE events; return (events, done_seen)."""
    n, done = 0, False
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        n += 1
        if line.strip() == "data: [DONE]":
            done = True
            break
        if limit is not None and n >= limit:
            break
    return n, done


async def chat(c):
    msgs = [{"role": "user", "content": words(random.randint(1, 30))}]
    if random.random() < 0.3: msgs.insert(0, {"role": "system", "content": "You are soak. " + words(5)})
    stream = random.random() < 0.5
    body = chat_body(msgs, stream)
    kind = "chat_stream" if stream else "chat"
    if stream:
        async with c.stream("POST", "/v1/chat/completions", json=body) as r:
            if r.status_code == 200:
                _, done = await read_sse(r)
                if not done: problems.append((round(time.time() - t0), kind, "no [DONE]"))
            else:
                await r.aread()
            note(kind, r.status_code)
    else:
        r = await c.post("/v1/chat/completions", json=body)
        note(kind, r.status_code)


async def multiturn(c):
    msgs = [{"role": "system", "content": "Multi-turn soak " + words(3)}]
    for turn in range(random.randint(3, 8)):
        msgs.append({"role": "user", "content": words(random.randint(3, 20))})
        body = chat_body(msgs, stream=random.random() < 0.5)
        body.pop("n", None); body.pop("response_format", None)
        if body["stream"]:
            text = []
            async with c.stream("POST", "/v1/chat/completions", json=body) as r:
                if r.status_code != 200:
                    await r.aread(); note("multiturn", r.status_code); return
                async for line in r.aiter_lines():
                    if line.startswith("data:") and line.strip() != "data: [DONE]":
                        d = json.loads(line[5:])
                        for ch in d.get("choices", []):
                            text.append(ch["delta"].get("content") or "")
            reply = "".join(text)
            note("multiturn", 200)
        else:
            r = await c.post("/v1/chat/completions", json=body)
            note("multiturn", r.status_code)
            if r.status_code != 200: return
            reply = r.json()["choices"][0]["message"].get("content") or ""
        msgs.append({"role": "assistant", "content": reply or words(2)})


async def completion(c):
    body = {"model": "rwkv-7", "prompt": words(random.randint(1, 40)),
            "max_tokens": random.choice([0, 4, 16, 32]), **sampling()}
    if body["max_tokens"] == 0 or random.random() < 0.1:
        body["echo"] = True; body["logprobs"] = random.choice([0, 1, 3])
    elif random.random() < 0.1:
        body["logprobs"] = 2
    if random.random() < 0.2: body["stop"] = ["\n", "o"]
    stream = random.random() < 0.4 and body["max_tokens"] > 0
    body["stream"] = stream
    if stream:
        async with c.stream("POST", "/v1/completions", json=body) as r:
            if r.status_code == 200:
                _, done = await read_sse(r)
                if not done: problems.append((round(time.time() - t0), "completion_stream", "no [DONE]"))
            else:
                await r.aread()
            note("completion_stream", r.status_code)
    else:
        r = await c.post("/v1/completions", json=body)
        note("completion", r.status_code)


async def poll(c, tid, kind, limit=60):
    t = time.time()
    while time.time() - t < limit:
        r = await c.get(f"/v1/tasks/{tid}/get_result")
        if r.status_code != 200:
            note(kind + "_get", r.status_code); return None
        if r.json()["finished"]:
            note(kind + "_get", 200); return r.json()
        await asyncio.sleep(0.2)
    problems.append((round(time.time() - t0), kind, f"{tid} never finished"))
    return None


async def task_tmp(c):
    body = {"prompt": words(random.randint(1, 30)), "max_tokens": random.choice([4, 16, 48]), **sampling()}
    r = await c.post("/v1/tasks/tmp", json=body)
    note("task_tmp", r.status_code)
    if r.status_code == 200:
        await poll(c, r.json()["task_id"], "task_tmp")


async def task_create_cycle(c):
    body = {"prompt": words(random.randint(1, 30)), "max_tokens": random.choice([8, 16, 32]),
            "stream": True, **sampling()}
    tid = None
    async with c.stream("POST", "/v1/tasks/create", json=body) as r:
        note("task_create_stream", r.status_code)
        if r.status_code != 200:
            await r.aread(); return
        async for line in r.aiter_lines():
            if line.startswith("data:") and line.strip() != "data: [DONE]":
                d = json.loads(line[5:])
                tid = tid or d.get("task_id")
            if line.strip() == "data: [DONE]":
                break
    if not tid: return
    # re-stream from a position (finished task)
    async with c.stream("GET", f"/v1/tasks/{tid}/stream", params={"pos": random.randint(0, 4)}) as r:
        if r.status_code == 200: await read_sse(r)
        else: await r.aread()
        note("task_restream", r.status_code)
    # fork (tmp or not)
    tmpfork = random.random() < 0.5
    r = await c.post(f"/v1/tasks/{tid}/fork", params={"tmp": tmpfork},
                     json={"prompt": " " + words(3), "max_tokens": 8, **sampling()})
    note("task_fork", r.status_code)
    if r.status_code == 200:
        fid = r.json()["task_id"]
        await poll(c, fid, "task_fork")
        if not tmpfork and random.random() < 0.7:
            r = await c.post(f"/v1/tasks/{fid}/delete"); note("task_delete", r.status_code)
    # continue
    r = await c.post(f"/v1/tasks/{tid}/continue", json={"prompt": " " + words(4), "max_tokens": 8})
    note("task_continue", r.status_code)
    if r.status_code == 200:
        await poll(c, tid, "task_continue")
    r = await c.get(f"/v1/tasks/{tid}/status"); note("task_status", r.status_code)
    if random.random() < 0.85:
        r = await c.post(f"/v1/tasks/{tid}/delete"); note("task_delete", r.status_code)
    else:
        persistent.append(tid)


async def task_stop(c):
    kind_tmp = random.random() < 0.5
    r = await c.post("/v1/tasks/tmp" if kind_tmp else "/v1/tasks/create",
                     json={"prompt": words(10), "max_tokens": 2000, **sampling()})
    note("task_longrun", r.status_code)
    if r.status_code != 200: return
    tid = r.json()["task_id"]
    await asyncio.sleep(random.uniform(0.1, 1.5))
    r = await c.post(f"/v1/tasks/{tid}/stop"); note("task_stop", r.status_code)
    if r.status_code == 200 and r.json()["status"] != 3:
        problems.append((round(time.time() - t0), "task_stop", f"status {r.json()['status']} after stop"))
    if random.random() < 0.5:
        r = await c.post(f"/v1/tasks/{tid}/continue", json={"max_tokens": 4}); note("task_continue_after_stop", r.status_code)
        if r.status_code == 200: await poll(c, tid, "task_continue_after_stop")
    r = await c.post(f"/v1/tasks/{tid}/delete"); note("task_delete", r.status_code)


async def template_cycle(c):
    # make a template (max_tokens=0 prefill) if few exist, else use one
    if len(templates) < 6 or random.random() < 0.05:
        r = await c.post("/v1/tasks/create", json={"prompt": "System: template " + words(20), "max_tokens": 0})
        note("tpl_prefill", r.status_code)
        if r.status_code != 200: return
        tid = r.json()["task_id"]
        name = f"soak{random.randint(0, 10**9)}"
        r = await c.post(f"/v1/tasks/{tid}/as_template", params={"name": name})
        note("tpl_as_template", r.status_code)
        r2 = await c.post(f"/v1/tasks/{tid}/delete"); note("task_delete", r2.status_code)
        if r.status_code == 200:
            templates.append(r.json()["task_id"])
    if not templates: return
    tpl = random.choice(templates)
    x = random.random()
    if x < 0.4:
        r = await c.post(f"/v1/tasks/{tpl}/fork", params={"tmp": True},
                         json={"prompt": "\n\nUser: " + words(4), "max_tokens": 8, **sampling()})
        note("tpl_fork", r.status_code)
        if r.status_code == 200: await poll(c, r.json()["task_id"], "tpl_fork")
    elif x < 0.8:
        body = chat_body([{"role": "user", "content": words(5)}], stream=False)
        body["model"] = "rwkv-7:" + tpl; body.pop("n", None); body.pop("response_format", None)
        r = await c.post("/v1/chat/completions", json=body)
        note("tpl_chat", r.status_code)
    elif x < 0.9:
        r = await c.post(f"/v1/tasks/{tpl}/continue", json={"prompt": "x", "max_tokens": 2})
        note("tpl_continue_refused", r.status_code)
    else:
        if len(templates) > 3:
            templates.remove(tpl)
            r = await c.post(f"/v1/tasks/{tpl}/delete", params={"force": True})
            note("tpl_delete", r.status_code)


async def disconnect(c):
    x = random.random()
    if x < 0.5:
        body = chat_body([{"role": "user", "content": words(10)}], stream=True)
        body["max_tokens"] = random.choice([200, 1000]); body.pop("n", None); body.pop("response_format", None)
        req = ("POST", "/v1/chat/completions", body)
    elif x < 0.75:
        req = ("POST", "/v1/completions", {"model": "rwkv-7", "prompt": words(5), "max_tokens": 500, "stream": True})
    else:
        req = ("POST", "/v1/tasks/tmp", {"prompt": words(5), "max_tokens": 500, "stream": True})
    async with c.stream(req[0], req[1], json=req[2]) as r:
        note("disconnect", r.status_code)
        if r.status_code == 200:
            await read_sse(r, limit=random.randint(1, 5))
    # leaving the context closes the connection mid-stream


async def invalid(c):
    cases = [
        ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": []}),
        ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "temperature": -1}),
        ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "logit_bias": {"99999999": 5}}),
        ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}),
        ("POST", "/v1/completions", {"model": "rwkv-7", "prompt": "x", "logprobs": True}),
        ("POST", "/v1/completions", {"model": "rwkv-7"}),
        ("POST", "/v1/tasks/tmp", {"prompt": "x", "bogus": 1}),
        ("POST", "/v1/tasks/tmp", {"prompt": "x", "temperature": 5}),
        ("POST", "/v1/tasks/create", {"max_tokens": 3}),
        ("GET", "/v1/tasks/TASK_00000000000000000000000000000000/get_result", None),
        ("POST", "/v1/tasks/TMP_deadbeef/continue", {"prompt": "x"}),
        ("POST", "/v1/tasks/_nonexistent/fork", {}),
        ("POST", "/v1/tasks/xyz/as_template", None),
        ("GET", "/v1/models/nope", None),
        ("POST", "/v1/chat/completions", "{not json"),
        ("POST", "/v1/chat/completions", {"model": "rwkv-7:_nosuchtemplate", "messages": [{"role": "user", "content": "x"}]}),
        ("POST", "/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "weird"}}),
        ("GET", "/v1/tasks/TASK_00000000000000000000000000000000/stream", None),
        ("POST", "/v1/tasks/fim", {"prefix": "", "suffix": ""}),
        ("GET", f"/v1/nope/{random.randint(0, 10**9)}", None),
        ("POST", f"/v1/tasks/TMP_{random.randint(0, 10**9):032x}/stop", None),
    ]
    m, p, b = random.choice(cases)
    if isinstance(b, str):
        r = await c.request(m, p, content=b, headers={"content-type": "application/json"})
    elif b is None:
        r = await c.request(m, p)
    else:
        r = await c.request(m, p, json=b)
    note("invalid", r.status_code)
    if r.status_code < 400:
        problems.append((round(time.time() - t0), "invalid", f"{m} {p} got {r.status_code}"))


async def misc(c):
    x = random.random()
    if x < 0.3:
        r = await c.post("/v1/tasks/fim", json={"prefix": "def f(", "suffix": "return x", "max_tokens": 8})
        note("fim", r.status_code)
        if r.status_code == 200: await poll(c, r.json()["task_id"], "fim")
    elif x < 0.5:
        r = await c.get("/v1/models"); note("models", r.status_code)
    elif x < 0.7:
        r = await c.get("/v1/tasks/list"); note("list", r.status_code)
    elif x < 0.85 and persistent:
        tid = random.choice(persistent)
        r = await c.get(f"/v1/tasks/{tid}/get_result"); note("persistent_get", r.status_code)
    else:
        r = await c.post("/v1/chat/completions", json={
            "model": "rwkv-7", "messages": [{"role": "user", "content": "weather?"}], "max_tokens": 40,
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}}}}],
            "tool_choice": random.choice(["auto", "required"])})
        note("tools", r.status_code)


ACTIONS = [(chat, 20), (multiturn, 10), (completion, 14), (task_tmp, 10), (task_create_cycle, 8),
           (task_stop, 5), (template_cycle, 8), (disconnect, 8), (invalid, 10), (misc, 7)]


async def worker(i, c, end):
    fns, ws = zip(*ACTIONS)
    while time.time() < end:
        fn = random.choices(fns, ws)[0]
        try:
            await fn(c)
        except httpx.TimeoutException as e:
            problems.append((round(time.time() - t0), fn.__name__, f"TIMEOUT {type(e).__name__}"))
            stats[fn.__name__ + "_timeout"] += 1
        except Exception as e:
            problems.append((round(time.time() - t0), fn.__name__, f"EXC {type(e).__name__}: {e}"[:300]))
            stats[fn.__name__ + "_exc"] += 1


def proc_sample():
    st = open(f"/proc/{PID}/status").read()
    rss = int([l for l in st.splitlines() if l.startswith("VmRSS")][0].split()[1])
    thr = int([l for l in st.splitlines() if l.startswith("Threads")][0].split()[1])
    fds = len(os.listdir(f"/proc/{PID}/fd"))
    sz = lambda p: os.path.getsize(p) if os.path.exists(p) else 0
    return rss, thr, fds, sz(DB), sz(DB + "-wal")


async def sampler(c, end, w):
    while True:
        try:
            rss, thr, fds, db, wal = proc_sample()
            h = (await c.get("/health")).json()
            pc = h["prefix_cache"]
            mt = (await c.get("/metrics")).text
            mlines = sum(1 for l in mt.splitlines() if l and not l.startswith("#"))
            lst = (await c.get("/v1/tasks/list", params={"limit": 0})).json()
            row = dict(t=round(time.time() - t0), requests=sum(v for k, v in stats.items()),
                       rss_kb=rss, threads=thr, fds=fds, db_bytes=db, wal_bytes=wal,
                       cache_entries=pc["entries"], cache_bytes=pc["bytes"], cache_evictions=pc["evictions"],
                       queue=h["queue"], active=h["active"], capacity=h["capacity"],
                       finishing=h["finishing"], scoring=h["scoring"], unsaved=h["task_store"]["unsaved"],
                       cpu_tasks=lst["cpu_cache_count"], db_tasks=lst["database_count"],
                       metric_lines=mlines, templates=len(templates), problems=len(problems))
            w.writerow(row); sys.stdout.flush()
            print(json.dumps(row), flush=True)
        except Exception as e:
            print("sampler error", repr(e), flush=True)
        if time.time() > end + 60:
            return
        await asyncio.sleep(30)


async def main():
    end = time.time() + DURATION
    f = open(CSV, "w", newline="")
    w = csv.DictWriter(f, fieldnames=["t", "requests", "rss_kb", "threads", "fds", "db_bytes", "wal_bytes",
                                      "cache_entries", "cache_bytes", "cache_evictions", "queue", "active",
                                      "capacity", "finishing", "scoring", "unsaved", "cpu_tasks", "db_tasks",
                                      "metric_lines", "templates", "problems"])
    w.writeheader()
    class W:
        def writerow(self, r): w.writerow(r); f.flush()
    limits = httpx.Limits(max_connections=CONC * 2 + 4)
    async with httpx.AsyncClient(base_url=URL, timeout=TIMEOUT, limits=limits) as c, \
               httpx.AsyncClient(base_url=URL, timeout=30) as sc:
        s = asyncio.create_task(sampler(sc, end, W()))
        await asyncio.gather(*(worker(i, c, end) for i in range(CONC)))
        print("load done", flush=True)
        await s
    print("STATS", json.dumps(dict(sorted(stats.items()))))
    print("CODES", json.dumps({f"{k}:{s}": v for (k, s), v in sorted(codes.items(), key=str)}))
    print("PROBLEMS", len(problems))
    for p in problems[:200]:
        print("  ", p)


asyncio.run(main())
