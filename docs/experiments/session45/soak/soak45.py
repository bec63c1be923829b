"""Soak load + sampler in one process (one load client).
usage: uv run python /tmp/qa_soak/soak.py PID DURATION_S WORKERS OUTDIR [PORT] [DBPATH]
"""
import asyncio, json, os, random, sqlite3, sys, time, traceback, collections

import httpx

PID = int(sys.argv[1]); DUR = float(sys.argv[2]); WORKERS = int(sys.argv[3]); OUT = sys.argv[4]
PORT = int(sys.argv[5]) if len(sys.argv) > 5 else 8101
DB = sys.argv[6] if len(sys.argv) > 6 else "/tmp/soak45_db/tasks.db"
BASE = f"http://127.0.0.1:{PORT}"
os.makedirs(OUT, exist_ok=True)
rng = random.Random(int(os.environ.get("SOAK_SEED", "1234")))
counts = collections.Counter()
lat = collections.defaultdict(list)  # op -> [seconds] for the current minute
created_ids = {}   # id -> op that made it (persistent/tmp ids whose end we watch)
deleted_ids = set()
templates_live = set()
templates_deleted = set()
errlog = open(f"{OUT}/errors.log", "a")
T0 = time.time()
WORDS = ("alpha beta gamma delta river mountain code python rust kernel cache state token "
         "matrix vector soak leak memory server client batch queue prefix suffix").split()


def uniq_text(n=None):
    n = n or rng.randint(5, 120)
    return " ".join(rng.choice(WORDS) for _ in range(n)) + f" #{rng.getrandbits(48):x}"


def err(op, msg):
    counts[f"ERR {op}"] += 1
    errlog.write(f"{time.time()-T0:8.1f} {op}: {msg}\n"); errlog.flush()


async def timed(op, coro):
    t = time.time()
    try:
        r = await coro
    finally:
        lat[op].append(time.time() - t)
    return r


async def sse_lines(resp):
    async for line in resp.aiter_lines():
        if line.startswith("data: "):
            yield line[6:]


# ---------------- operations ----------------
async def op_chat(c):
    stream = rng.random() < 0.5
    body = {"model": "rwkv-7", "max_tokens": rng.randint(8, 80), "stream": stream,
            "messages": [{"role": "system", "content": rng.choice(["You are helpful.", uniq_text(20)])},
                         {"role": "user", "content": uniq_text()}]}
    if rng.random() < 0.7: body["reasoning_effort"] = "none"
    if rng.random() < 0.4: body["stop"] = rng.choice([["e"], ["\n"], ["a", "the"], "o", ["zz", "xy", "q"]])
    if rng.random() < 0.2: body["n"] = 2
    if not stream:
        r = await timed("chat", c.post(f"{BASE}/v1/chat/completions", json=body))
        if r.status_code != 200: return err("chat", f"{r.status_code} {r.text[:200]}")
        counts["chat"] += 1
        return
    cut = rng.random() < 0.3
    t = time.time()
    async with c.stream("POST", f"{BASE}/v1/chat/completions", json=body) as r:
        if r.status_code != 200: return err("chat_stream", f"{r.status_code} {(await r.aread())[:200]}")
        k = 0; done = False
        async for d in sse_lines(r):
            k += 1
            if d == "[DONE]": done = True; break
            if cut and k >= 3:
                counts["chat_stream_cut"] += 1
                lat["chat_stream"].append(time.time() - t)
                return  # leaving the context closes the connection mid-stream
        lat["chat_stream"].append(time.time() - t)
        if not done: err("chat_stream", "no [DONE]")
        else: counts["chat_stream"] += 1


async def op_completion(c):
    stream = rng.random() < 0.4
    body = {"model": "rwkv-7", "prompt": uniq_text(), "max_tokens": rng.randint(5, 60), "stream": stream}
    if rng.random() < 0.5: body["stop"] = rng.choice([["e"], "\n\n", ["th", "in"]])
    if rng.random() < 0.15: body["suffix"] = uniq_text(10)
    if not stream:
        r = await timed("completion", c.post(f"{BASE}/v1/completions", json=body))
        if r.status_code != 200: return err("completion", f"{r.status_code} {r.text[:200]}")
        counts["completion"] += 1; return
    t = time.time(); cut = rng.random() < 0.3
    async with c.stream("POST", f"{BASE}/v1/completions", json=body) as r:
        if r.status_code != 200: return err("completion_stream", f"{r.status_code}")
        k = 0
        async for d in sse_lines(r):
            k += 1
            if d == "[DONE]": break
            if cut and k >= 2:
                counts["completion_stream_cut"] += 1; break
    lat["completion_stream"].append(time.time() - t)
    counts["completion_stream"] += 1


async def wait_finished(c, tid, timeout=120):
    t = time.time()
    while time.time() - t < timeout:
        r = await c.get(f"{BASE}/v1/tasks/{tid}/get_result")
        if r.status_code != 200: err("get_result", f"{tid} {r.status_code} {r.text[:100]}"); return None
        j = r.json()
        if j["finished"]: return j
        await asyncio.sleep(0.3)
    err("wait_finished", f"{tid} not finished after {timeout}s")
    return None


async def op_tmp(c):
    body = {"prompt": uniq_text(), "max_tokens": rng.randint(5, 60), "stream": rng.random() < 0.6}
    if body["stream"]:
        t = time.time(); cut = rng.random() < 0.3; tid = None
        async with c.stream("POST", f"{BASE}/v1/tasks/tmp", json=body) as r:
            if r.status_code != 200: return err("tmp_stream", f"{r.status_code}")
            k = 0
            async for d in sse_lines(r):
                k += 1
                if d == "[DONE]": break
                if k == 1: tid = json.loads(d).get("task_id")
                if cut and k >= 3: counts["tmp_stream_cut"] += 1; break
        lat["tmp_stream"].append(time.time() - t)
        if tid: created_ids[tid] = "tmp_stream"
        counts["tmp_stream"] += 1
    else:
        r = await timed("tmp", c.post(f"{BASE}/v1/tasks/tmp", json=body))
        if r.status_code != 200: return err("tmp", f"{r.status_code} {r.text[:200]}")
        tid = r.json()["task_id"]; created_ids[tid] = "tmp"
        if rng.random() < 0.5: await wait_finished(c, tid)  # else abandoned
        counts["tmp"] += 1


async def op_persistent(c):
    body = {"prompt": uniq_text(), "max_tokens": rng.randint(5, 50), "seed": rng.randint(0, 10**6)}
    r = await timed("create", c.post(f"{BASE}/v1/tasks/create", json=body))
    if r.status_code != 200: return err("create", f"{r.status_code} {r.text[:200]}")
    tid = r.json()["task_id"]; created_ids[tid] = "create"; counts["create"] += 1
    if await wait_finished(c, tid) is None: return
    x = rng.random()
    if x < 0.3:
        r = await timed("continue", c.post(f"{BASE}/v1/tasks/{tid}/continue", json={"prompt": uniq_text(10), "max_tokens": 20}))
        if r.status_code != 200: return err("continue", f"{r.status_code} {r.text[:200]}")
        counts["continue"] += 1
        await wait_finished(c, tid)
    elif x < 0.55:
        tmp = rng.random() < 0.5
        r = await timed("fork", c.post(f"{BASE}/v1/tasks/{tid}/fork?tmp={'true' if tmp else 'false'}", json={"prompt": uniq_text(8), "max_tokens": 15}))
        if r.status_code != 200: return err("fork", f"{r.status_code} {r.text[:200]}")
        fid = r.json()["task_id"]; created_ids[fid] = "fork"; counts["fork"] += 1
        await wait_finished(c, fid)
        if not tmp and rng.random() < 0.5:
            r = await c.post(f"{BASE}/v1/tasks/{fid}/delete")
            if r.status_code == 200: deleted_ids.add(fid); counts["delete"] += 1
            else: err("delete", f"{fid} {r.status_code} {r.text[:100]}")
    if rng.random() < 0.5:
        r = await timed("delete", c.post(f"{BASE}/v1/tasks/{tid}/delete"))
        if r.status_code == 200: deleted_ids.add(tid); counts["delete"] += 1
        else: err("delete", f"{tid} {r.status_code} {r.text[:100]}")


async def op_stop(c):
    body = {"prompt": uniq_text(), "max_tokens": 2000, "seed": 1}
    r = await c.post(f"{BASE}/v1/tasks/create", json=body)
    if r.status_code != 200: return err("create_long", f"{r.status_code}")
    tid = r.json()["task_id"]; created_ids[tid] = "create_long"
    # subscribe to its stream and drop it quickly
    try:
        async with c.stream("GET", f"{BASE}/v1/tasks/{tid}/stream?pos=0") as s:
            k = 0
            async for d in sse_lines(s):
                k += 1
                if k >= 3: break
    except Exception as e:
        err("stream_sub", repr(e))
    await asyncio.sleep(rng.uniform(0, 1.0))
    r = await timed("stop", c.post(f"{BASE}/v1/tasks/{tid}/stop"))
    if r.status_code != 200: return err("stop", f"{r.status_code} {r.text[:200]}")
    st = r.json()
    if st.get("status") != 3: err("stop", f"{tid} status after stop {st}")
    counts["stop"] += 1
    if rng.random() < 0.7:
        r = await c.post(f"{BASE}/v1/tasks/{tid}/delete")
        if r.status_code == 200: deleted_ids.add(tid); counts["delete"] += 1
        else: err("delete", f"{tid} {r.status_code} {r.text[:100]}")


async def op_template(c):
    r = await c.post(f"{BASE}/v1/tasks/create", json={"prompt": uniq_text(40), "max_tokens": 0})
    if r.status_code != 200: return err("tpl_create", f"{r.status_code} {r.text[:200]}")
    tid = r.json()["task_id"]; created_ids[tid] = "tpl_src"
    r = await timed("as_template", c.post(f"{BASE}/v1/tasks/{tid}/as_template"))
    if r.status_code != 200: return err("as_template", f"{r.status_code} {r.text[:200]}")
    tpl = r.json()["task_id"]; templates_live.add(tpl); counts["as_template"] += 1
    for _ in range(rng.randint(1, 3)):
        r = await c.post(f"{BASE}/v1/tasks/{tpl}/fork?tmp=true", json={"prompt": uniq_text(5), "max_tokens": 10, "stream": False})
        if r.status_code != 200: err("tpl_fork", f"{r.status_code} {r.text[:200]}"); continue
        counts["tpl_fork"] += 1; created_ids[r.json()["task_id"]] = "tpl_fork"
    if rng.random() < 0.3:  # OpenAI route from template
        r = await timed("chat_tpl", c.post(f"{BASE}/v1/chat/completions", json={"model": "rwkv-7:" + tpl, "max_tokens": 10, "reasoning_effort": "none", "messages": [{"role": "user", "content": uniq_text(5)}]}))
        if r.status_code != 200: err("chat_tpl", f"{r.status_code} {r.text[:200]}")
    # delete most templates; keep ~1 in 12 (so a handful persist for the restart check)
    if rng.random() < 0.92:
        r = await timed("tpl_delete", c.post(f"{BASE}/v1/tasks/{tpl}/delete?force=true"))
        if r.status_code == 200: templates_live.discard(tpl); templates_deleted.add(tpl); counts["tpl_delete"] += 1
        else: err("tpl_delete", f"{tpl} {r.status_code} {r.text[:100]}")
    r = await c.post(f"{BASE}/v1/tasks/{tid}/delete")
    if r.status_code == 200: deleted_ids.add(tid)


async def op_fim(c):
    r = await timed("fim", c.post(f"{BASE}/v1/tasks/fim", json={"prefix": uniq_text(20), "suffix": uniq_text(10), "max_tokens": 20}))
    if r.status_code != 200: return err("fim", f"{r.status_code} {r.text[:200]}")
    created_ids[r.json()["task_id"]] = "fim"; counts["fim"] += 1


async def op_list(c):
    off = rng.choice([0, 0, 50, 500, 5000])
    r = await timed("list", c.get(f"{BASE}/v1/tasks/list?offset={off}&limit=100"))
    if r.status_code != 200: return err("list", f"{r.status_code}")
    counts["list"] += 1


def long_text(lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) + f" #{rng.getrandbits(48):x}"


async def consume_stream(c, url, body, op, cut_after=None, expect_lp=None):
    t = time.time(); k = 0; done = False
    async with c.stream("POST", url, json=body) as r:
        if r.status_code != 200:
            return err(op, f"{r.status_code} {(await r.aread())[:200]}")
        async for d in sse_lines(r):
            k += 1
            if d == "[DONE]": done = True; break
            if expect_lp and k <= 3:
                j = json.loads(d)
                if "error" in j: err(op, f"stream error {d[:200]}"); return
            if cut_after is not None and k >= cut_after:
                counts[op + "_cut"] += 1; lat[op].append(time.time() - t); return
    lat[op].append(time.time() - t)
    if not done: err(op, "no [DONE]")
    else: counts[op] += 1


async def op_chat_lp(c):
    stream = rng.random() < 0.5
    body = {"model": "rwkv-7", "max_tokens": rng.randint(4, 60), "stream": stream, "logprobs": True,
            "messages": [{"role": "user", "content": uniq_text()}]}
    if rng.random() < 0.85: body["top_logprobs"] = rng.randint(0, 20)
    if rng.random() < 0.7: body["reasoning_effort"] = "none"
    if rng.random() < 0.3: body["stop"] = rng.choice([["e"], ["\n"], "o"])
    if rng.random() < 0.15: body["n"] = 2
    if not stream:
        r = await timed("chat_lp", c.post(f"{BASE}/v1/chat/completions", json=body))
        if r.status_code != 200: return err("chat_lp", f"{r.status_code} {r.text[:200]}")
        j = r.json()
        for ch in j["choices"]:
            lp = ch.get("logprobs")
            if lp is None or "content" not in lp: err("chat_lp", f"no logprobs {str(ch)[:200]}"); return
            for e in lp["content"] or []:
                if len(e["top_logprobs"]) != body.get("top_logprobs", 0):
                    err("chat_lp", f"top_logprobs len {len(e['top_logprobs'])} != {body.get('top_logprobs', 0)}"); return
        counts["chat_lp"] += 1; return
    cut = rng.randint(2, 6) if rng.random() < 0.3 else None
    await consume_stream(c, f"{BASE}/v1/chat/completions", body, "chat_lp_stream", cut, True)


async def op_compl_lp(c):
    stream = rng.random() < 0.5
    body = {"model": "rwkv-7", "prompt": uniq_text(), "max_tokens": rng.randint(4, 60), "stream": stream,
            "logprobs": rng.randint(0, 5)}
    if rng.random() < 0.3: body["stop"] = rng.choice([["e"], "\n\n", ["th", "in"]])
    if rng.random() < 0.15: body["n"] = 2
    if not stream:
        r = await timed("compl_lp", c.post(f"{BASE}/v1/completions", json=body))
        if r.status_code != 200: return err("compl_lp", f"{r.status_code} {r.text[:200]}")
        for ch in r.json()["choices"]:
            lp = ch.get("logprobs")
            if lp is None or len(lp["tokens"]) != len(lp["token_logprobs"]):
                err("compl_lp", f"bad logprobs {str(ch)[:200]}"); return
        counts["compl_lp"] += 1; return
    cut = rng.randint(2, 5) if rng.random() < 0.3 else None
    await consume_stream(c, f"{BASE}/v1/completions", body, "compl_lp_stream", cut, True)


async def op_score(c):
    """completions echo+logprobs: prompt scoring (ScoreJob per prompt)."""
    nprompts = rng.choice([1, 1, 2, 3, 4])
    prompts = [long_text(3, 60) if rng.random() < 0.7 else long_text(300, 1500) for _ in range(nprompts)]
    prompt = prompts[0] if nprompts == 1 and rng.random() < 0.5 else prompts
    mt = rng.choice([0, 0, 0, 1, 5, 20])
    stream = rng.random() < 0.3
    body = {"model": "rwkv-7", "prompt": prompt, "echo": True, "logprobs": rng.randint(0, 5),
            "max_tokens": mt, "stream": stream, "temperature": rng.choice([0, 1.0])}
    mode = rng.random()
    if stream:
        cut = rng.randint(1, 3) if mode < 0.3 else None
        return await consume_stream(c, f"{BASE}/v1/completions", body, "score_stream", cut, True)
    if mode < 0.2:  # disconnect mid-scoring (client gives up early)
        try:
            await asyncio.wait_for(c.post(f"{BASE}/v1/completions", json=body), rng.uniform(0.05, 0.6))
            counts["score_cut_finished"] += 1
        except asyncio.TimeoutError:
            counts["score_cut"] += 1
        return
    r = await timed("score", c.post(f"{BASE}/v1/completions", json=body))
    if r.status_code != 200: return err("score", f"{r.status_code} {r.text[:200]}")
    j = r.json()
    n = len(prompt) if isinstance(prompt, list) else 1
    if len(j["choices"]) != n: err("score", f"{len(j['choices'])} choices for {n} prompts"); return
    for ch in j["choices"]:
        lp = ch.get("logprobs")
        if lp is None or not lp["tokens"] or lp["token_logprobs"][0] is not None:
            err("score", f"bad echo logprobs {str(ch)[:200]}"); return
    counts["score"] += 1


async def op_named_template(c):
    r = await c.post(f"{BASE}/v1/tasks/create", json={"prompt": uniq_text(30), "max_tokens": rng.choice([0, 5])})
    if r.status_code != 200: return err("ntpl_create", f"{r.status_code} {r.text[:200]}")
    tid = r.json()["task_id"]; created_ids[tid] = "ntpl_src"
    if await wait_finished(c, tid) is None: return
    name = f"soak_{rng.getrandbits(40):x}"
    r = await timed("as_template_named", c.post(f"{BASE}/v1/tasks/{tid}/as_template?name={name}"))
    if r.status_code != 200: return err("as_template_named", f"{r.status_code} {r.text[:200]}")
    tpl = r.json()["task_id"]
    if tpl != "_" + name: err("as_template_named", f"id {tpl} for name {name}")
    counts["as_template_named"] += 1
    r = await c.post(f"{BASE}/v1/tasks/{tid}/as_template?name={name}")  # taken -> 409
    if r.status_code != 409: err("as_template_dup", f"{r.status_code} {r.text[:200]}")
    r = await c.post(f"{BASE}/v1/tasks/{tpl}/fork?tmp=true", json={"prompt": uniq_text(5), "max_tokens": 8})
    if r.status_code != 200: err("ntpl_fork", f"{r.status_code} {r.text[:200]}")
    else: counts["ntpl_fork"] += 1
    r = await c.post(f"{BASE}/v1/tasks/{tpl}/delete")  # no force -> 403
    if r.status_code != 403: err("ntpl_delete_noforce", f"{r.status_code} {r.text[:200]}")
    r = await c.post(f"{BASE}/v1/tasks/{tpl}/delete?force=true")
    if r.status_code == 200: counts["ntpl_delete"] += 1
    else: err("ntpl_delete", f"{r.status_code} {r.text[:200]}")
    await c.post(f"{BASE}/v1/tasks/{tid}/delete")


OPS = [(op_chat_lp, 16), (op_compl_lp, 14), (op_score, 20), (op_chat, 10), (op_completion, 6),
       (op_tmp, 8), (op_persistent, 9), (op_stop, 3), (op_template, 3), (op_named_template, 4),
       (op_fim, 3), (op_list, 4)]


async def worker(i, stop_at):
    async with httpx.AsyncClient(timeout=httpx.Timeout(120.0)) as c:
        while time.time() < stop_at:
            f = rng.choices([o for o, _ in OPS], [w for _, w in OPS])[0]
            try:
                await f(c)
            except Exception as e:
                err(f.__name__, repr(e)[:300])


# ---------------- sampler ----------------
def proc_stats(pid):
    d = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            k, v = line.split(":", 1)
            if k in ("VmRSS", "VmHWM", "Threads", "RssAnon", "RssFile"):
                d[k] = int(v.split()[0]) if k != "Threads" else int(v)
        d["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except FileNotFoundError:
        pass
    return d


def fsize(p):
    try: return os.path.getsize(p)
    except OSError: return 0


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") : return float(line.split()[-1])
    return None


async def sample(c, f, phase):
    s = {"t": round(time.time() - T0, 1), "phase": phase}
    s.update(proc_stats(PID))
    s["db"] = fsize(DB); s["wal"] = fsize(DB + "-wal"); s["shm"] = fsize(DB + "-shm")
    try:
        t = time.time(); h = (await c.get(f"{BASE}/health")).json(); s["health_ms"] = round((time.time()-t)*1e3, 1)
        pc = h["prefix_cache"]
        s.update(cap=h["capacity"], active=h["active"], queue=h["queue"], finishing=h["finishing"], scoring=h.get("scoring"),
                 unsaved=h["task_store"]["unsaved"], pc_entries=pc["entries"], pc_bytes=pc["bytes"],
                 pc_evict=pc["evictions"], status=h["status"])
        t = time.time(); m = (await c.get(f"{BASE}/metrics")).text; s["metrics_ms"] = round((time.time()-t)*1e3, 1)
        s["metrics_lines"] = len(m.splitlines())
        s["gen_tokens"] = metric(m, "rwkv_generated_tokens_total"); s["m_scoring"] = metric(m, "rwkv_scoring_jobs"); s["m_queue"] = metric(m, "rwkv_queue_length")
        t = time.time(); L = (await c.get(f"{BASE}/v1/tasks/list?offset=0&limit=100")).json(); s["list_ms"] = round((time.time()-t)*1e3, 1)
        s.update(list_cpu=L.get("cpu_cache_count"), list_db=L.get("database_count"), list_total=L.get("total_count"))
        t = time.time(); L = (await c.get(f"{BASE}/v1/tasks/list?offset=100000&limit=100")).json(); s["list_far_ms"] = round((time.time()-t)*1e3, 1)
        # fixed probe: greedy, same every time
        t = time.time()
        r = await c.post(f"{BASE}/v1/completions", json={"model": "rwkv-7", "prompt": "probe prompt fixed", "max_tokens": 16, "temperature": 0})
        s["probe_ms"] = round((time.time()-t)*1e3, 1); s["probe_text"] = hash(r.json()["choices"][0]["text"]) % 10**6 if r.status_code == 200 else r.status_code
    except Exception as e:
        s["sample_err"] = repr(e)[:200]
    # op latencies in this interval
    for k, v in list(lat.items()):
        if v: s[f"p50_{k}"] = round(sorted(v)[len(v)//2]*1e3); s[f"max_{k}"] = round(max(v)*1e3)
    lat.clear()
    s["counts"] = dict(counts)
    f.write(json.dumps(s) + "\n"); f.flush()
    print(json.dumps({k: s.get(k) for k in ("t", "phase", "VmRSS", "Threads", "fds", "db", "wal", "pc_entries", "pc_bytes", "list_db", "list_cpu", "list_ms", "probe_ms", "queue", "active", "scoring", "finishing", "m_scoring", "sample_err")}), flush=True)


async def sampler(stop_at, interval, phase):
    f = open(f"{OUT}/samples.jsonl", "a")
    async with httpx.AsyncClient(timeout=60) as c:
        while time.time() < stop_at:
            await sample(c, f, phase)
            await asyncio.sleep(interval)


async def main():
    stop_at = time.time() + DUR
    tasks = [asyncio.create_task(worker(i, stop_at)) for i in range(WORKERS)]
    smp = asyncio.create_task(sampler(stop_at + 1e9, 30, "load"))
    await asyncio.gather(*tasks)
    smp.cancel()
    json.dump({"created": created_ids, "deleted": sorted(deleted_ids), "tpl_live": sorted(templates_live),
               "tpl_deleted": sorted(templates_deleted), "counts": dict(counts)}, open(f"{OUT}/ids.json", "w"))
    print("LOAD DONE", dict(counts), flush=True)
    # idle sampling
    idle = float(os.environ.get("IDLE_S", "180"))
    await sampler(time.time() + idle, 30, "idle")


asyncio.run(main())
