"""Soak test for RWKV-Server: a mixed workload plus a resource sampler.

    python soak.py --url http://127.0.0.1:8791 --pid PID --db /tmp/h_soak/soak.db \
        --minutes 15 --workers 12 --samples samples.jsonl

Every request has a 60 s timeout; a timeout counts as a hang. Writes one JSON line per sample
to --samples and a summary at the end. Checks (wrong results): OpenAI response shapes, streams
ending with [DONE], usage <= max_tokens, greedy chat equal across a repeat (prefix cache hit)
and between stream / non-stream, a Task API stream equal to its get_result, stop -> status 3.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import re
import time
import traceback

import httpx

WORDS = ("alpha beta gamma delta river mountain cloud quantum linear attention state model "
         "token batch cache server python kernel memory thread socket garden ocean").split()

stats = collections.Counter()          # job/outcome counters
status_counts = collections.Counter()  # (route, status)
problems: list[str] = []               # wrong results / unexpected statuses (first 200)
latencies = collections.defaultdict(list)
T0 = time.monotonic()
LOG = None


def log(msg: str) -> None:
    line = f"{time.strftime('%H:%M:%S')} +{time.monotonic() - T0:7.1f}s {msg}"
    print(line, flush=True)
    if LOG:
        LOG.write(line + "\n")
        LOG.flush()


def problem(kind: str, msg: str) -> None:
    stats["problem:" + kind] += 1
    if len(problems) < 300:
        problems.append(f"+{time.monotonic() - T0:.1f}s {kind}: {msg[:400]}")
        log(f"PROBLEM {kind}: {msg[:400]}")


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def note(route: str, r: httpx.Response, ok=(200,)):
    status_counts[(route, r.status_code)] += 1
    if r.status_code >= 500:
        stats["5xx"] += 1
        problem("5xx", f"{route} -> {r.status_code}: {r.text[:300]}")
    elif r.status_code not in ok:
        problem("status", f"{route} -> {r.status_code}: {r.text[:300]}")
    return r.status_code in ok


async def sse_events(resp: httpx.Response):
    """Yield data payloads of an SSE response (comments skipped)."""
    buf = ""
    async for chunk in resp.aiter_text():
        buf += chunk
        while "\n\n" in buf:
            block, buf = buf.split("\n\n", 1)
            lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
            if lines:
                yield "\n".join(ln[6:] if ln.startswith("data: ") else ln for ln in lines)


# ---------------------------------------------------------------- OpenAI jobs
def check_chat(body: dict, j: dict, where: str) -> str | None:
    try:
        ch = j["choices"][0]
        msg = ch["message"]
        assert ch["finish_reason"] in ("stop", "length"), ch["finish_reason"]
        assert j["usage"]["completion_tokens"] <= body["max_tokens"], j["usage"]
        assert j["usage"]["prompt_tokens"] > 0
        assert isinstance(msg.get("content"), (str, type(None)))
        return (msg.get("content") or "") + "|R|" + (msg.get("reasoning_content") or "")
    except Exception as e:  # noqa: BLE001
        problem("chat_shape", f"{where}: {e!r} {json.dumps(j)[:300]}")
        return None


async def chat_once(c: httpx.AsyncClient, body: dict, stream: bool) -> str | None:
    route = "chat_stream" if stream else "chat"
    if not stream:
        r = await c.post("/v1/chat/completions", json=body)
        if not note(route, r):
            return None
        return check_chat(body, r.json(), route)
    content, reasoning, finish, done, usage = [], [], None, False, None
    async with c.stream("POST", "/v1/chat/completions",
                        json={**body, "stream": True,
                              "stream_options": {"include_usage": True}}) as r:
        if r.status_code != 200:
            await r.aread()
            note(route, r)
            return None
        note(route, r)
        async for ev in sse_events(r):
            if ev == "[DONE]":
                done = True
                continue
            if done:
                problem("chat_stream", "event after [DONE]")
            j = json.loads(ev)
            if "error" in j:
                problem("chat_stream_error", json.dumps(j)[:300])
                return None
            if j.get("usage"):
                usage = j["usage"]
            for ch in j.get("choices", []):
                d = ch.get("delta", {})
                content.append(d.get("content") or "")
                reasoning.append(d.get("reasoning_content") or "")
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
    if not done or finish not in ("stop", "length"):
        problem("chat_stream", f"done={done} finish={finish}")
        return None
    if usage is None or usage["completion_tokens"] > body["max_tokens"]:
        problem("chat_stream", f"usage {usage}")
    return "".join(content) + "|R|" + "".join(reasoning)


async def job_chat(c, rng):
    """A multi-turn chat resending its growing history; greedy turns are re-asked to check
    the cached replay (and stream vs non-stream) gives the same reply."""
    msgs = [{"role": "system", "content": "You are helpful. " + words(rng, rng.randint(5, 60))}]
    greedy = rng.random() < 0.5
    effort = {"reasoning_effort": "none"} if rng.random() < 0.5 else {}
    for turn in range(rng.randint(2, 5)):
        msgs.append({"role": "user", "content": words(rng, rng.randint(3, 40))})
        body = {"model": "rwkv-7", "messages": list(msgs), "max_tokens": rng.randint(8, 40),
                **effort}
        if greedy:
            body.update(temperature=0, top_p=1, top_k=0)
        else:
            body.update(temperature=1.0, seed=rng.randint(0, 10**6))
        stream = rng.random() < 0.5
        out = await chat_once(c, body, stream)
        if out is None:
            return
        if greedy and rng.random() < 0.4:  # the same turn again, the other way
            again = await chat_once(c, body, not stream)
            stats["chat_repeat_checked"] += 1
            if again is not None and again != out:
                problem("chat_mismatch", f"turn {turn}: {out[:120]!r} vs {again[:120]!r}")
        content = out.split("|R|")[0] or "ok"
        msgs.append({"role": "assistant", "content": content})
    stats["job_chat"] += 1


async def job_completion(c, rng):
    stream = rng.random() < 0.4
    body = {"model": "rwkv-7", "prompt": words(rng, rng.randint(3, 80)),
            "max_tokens": rng.randint(4, 48), "seed": rng.randint(0, 10**6)}
    if not stream and rng.random() < 0.3:
        body["n"] = 2
    if not stream and rng.random() < 0.2:
        body.update(echo=True, logprobs=1)
    if not stream:
        r = await c.post("/v1/completions", json=body)
        if note("completions", r):
            j = r.json()
            n = body.get("n", 1)
            if len(j["choices"]) != n or j["usage"]["completion_tokens"] > n * body["max_tokens"]:
                problem("completion_shape", json.dumps(j)[:300])
            if body.get("echo") and not j["choices"][0]["text"].startswith(body["prompt"]):
                problem("completion_echo", j["choices"][0]["text"][:100])
        stats["job_completion"] += 1
        return
    done, text = False, []
    async with c.stream("POST", "/v1/completions", json={**body, "stream": True}) as r:
        if r.status_code != 200:
            await r.aread()
            note("completions_stream", r)
            return
        note("completions_stream", r)
        async for ev in sse_events(r):
            if ev == "[DONE]":
                done = True
                continue
            j = json.loads(ev)
            if "error" in j:
                problem("completion_stream_error", ev[:300])
                return
            for ch in j.get("choices", []):
                text.append(ch.get("text") or "")
    if not done:
        problem("completion_stream", "no [DONE]")
    # the same seeded request, non-streamed, must give the same text
    if rng.random() < 0.3:
        r = await c.post("/v1/completions", json=body)
        if note("completions", r):
            stats["completion_repeat_checked"] += 1
            if r.json()["choices"][0]["text"] != "".join(text):
                problem("completion_mismatch", f"{''.join(text)[:100]!r} vs "
                        f"{r.json()['choices'][0]['text'][:100]!r}")
    stats["job_completion_stream"] += 1


# ---------------------------------------------------------------- Task API jobs
async def task_stream_text(c, path: str, method="GET", body=None):
    """(header, text, done, error) of a Task API stream."""
    text, header, done, err = [], None, False, None
    kw = {"json": body} if body is not None else {}
    async with c.stream(method, path, **kw) as r:
        if r.status_code != 200:
            await r.aread()
            note("task_stream", r)
            return None
        note("task_stream", r)
        async for ev in sse_events(r):
            if ev == "[DONE]":
                done = True
                continue
            j = json.loads(ev)
            if "error" in j:
                err = j
            elif header is None:
                header = j
            else:
                text.append(j["data"])
    return header, "".join(text), done, err


async def wait_finished(c, tid, timeout=60.0):
    t = time.monotonic()
    while time.monotonic() - t < timeout:
        r = await c.get(f"/v1/tasks/{tid}/get_result")
        if not note("get_result", r):
            return None
        if r.json()["finished"]:
            return r.json()
        await asyncio.sleep(0.1)
    problem("task_hang", f"{tid} not finished in {timeout}s")
    stats["hang"] += 1
    return None


async def job_task_lifecycle(c, rng):
    """create (stream or poll) -> stream replay == get_result -> continue -> fork ->
    maybe as_template + fork of it -> deletes (some tasks left for pruning)."""
    prompt = f"User: {words(rng, rng.randint(3, 50))}\n\nAssistant:"
    mt = rng.randint(4, 40)
    if rng.random() < 0.5:
        res = await task_stream_text(c, "/v1/tasks/create", "POST",
                                     {"prompt": prompt, "max_tokens": mt, "stream": True,
                                      "seed": rng.randint(0, 10**6)})
        if res is None:
            return
        header, text, done, err = res
        if not done or err or header is None:
            problem("task_stream", f"done={done} err={err}")
            return
        tid = header["task_id"]
        got = await wait_finished(c, tid)
        if got is None:
            return
        if got["result"] != text:
            problem("task_stream_mismatch", f"{tid}: {text[:80]!r} vs {got['result'][:80]!r}")
    else:
        r = await c.post("/v1/tasks/create", json={"prompt": prompt, "max_tokens": mt})
        if not note("create", r):
            return
        tid = r.json()["task_id"]
        got = await wait_finished(c, tid)
        if got is None:
            return
        res = await task_stream_text(c, f"/v1/tasks/{tid}/stream?pos=0")
        if res is None:
            return
        if res[1] != got["result"] or not res[2]:
            problem("task_replay_mismatch", f"{tid}: {res[1][:80]!r} vs {got['result'][:80]!r}")
    r = await c.get(f"/v1/tasks/{tid}/status")
    if note("status", r) and r.json()["status"] != 3:
        problem("task_status", r.text)
    # continue
    r = await c.post(f"/v1/tasks/{tid}/continue",
                     json={"prompt": f"\n\nUser: {words(rng, 8)}\n\nAssistant:",
                           "max_tokens": rng.randint(4, 24)})
    if note("continue", r):
        await wait_finished(c, tid)
    # fork (tmp or persistent)
    tmp = rng.random() < 0.5
    r = await c.post(f"/v1/tasks/{tid}/fork?tmp={'true' if tmp else 'false'}",
                     json={"prompt": " more", "max_tokens": 8})
    fid = None
    if note("fork", r):
        fid = r.json()["task_id"]
        await wait_finished(c, fid)
    if rng.random() < 0.25:
        r = await c.post(f"/v1/tasks/{tid}/as_template")
        if note("as_template", r):
            tpl = r.json()["task_id"]
            res = await task_stream_text(c, f"/v1/tasks/{tpl}/fork?tmp=true", "POST",
                                         {"prompt": " x", "max_tokens": 8, "stream": True})
            if res is not None and (not res[2] or res[3]):
                problem("template_fork_stream", str(res)[:200])
            r = await c.post(f"/v1/tasks/{tpl}/delete?force=true")
            note("delete_tpl", r)
    if rng.random() < 0.7:  # the rest stay, to exercise the database's pruning
        r = await c.post(f"/v1/tasks/{tid}/delete")
        note("delete", r, ok=(200,))
        if fid:
            r = await c.post(f"/v1/tasks/{fid}/delete")
            note("delete", r, ok=(200, 404))
    stats["job_task_lifecycle"] += 1


async def job_task_stop(c, rng):
    r = await c.post("/v1/tasks/create",
                     json={"prompt": f"User: {words(rng, 10)}\n\nAssistant:", "max_tokens": 3000})
    if not note("create", r):
        return
    tid = r.json()["task_id"]
    await asyncio.sleep(rng.uniform(0.2, 1.5))
    r = await c.post(f"/v1/tasks/{tid}/stop")
    if note("stop", r) and r.json()["status"] != 3:
        problem("stop_status", r.text)
    got = await wait_finished(c, tid, 20)
    if got is not None and not got["finished"]:
        problem("stop_unfinished", str(got))
    r = await c.post(f"/v1/tasks/{tid}/delete")
    note("delete", r)
    stats["job_task_stop"] += 1


async def job_tmp_stream(c, rng):
    res = await task_stream_text(c, "/v1/tasks/tmp", "POST",
                                 {"prompt": f"User: {words(rng, rng.randint(3, 30))}\n\nAssistant:",
                                  "max_tokens": rng.randint(4, 40), "stream": True})
    if res is not None and (not res[2] or res[3] or res[0] is None):
        problem("tmp_stream", str(res)[:200])
    stats["job_tmp_stream"] += 1


async def job_fim(c, rng):
    r = await c.post("/v1/tasks/fim", json={"prefix": "def f(x):\n    ", "suffix": "\n    return y",
                                            "max_tokens": rng.randint(4, 16), "stream": True})
    note("fim", r)
    stats["job_fim"] += 1


async def job_list(c, rng):
    r = await c.get("/v1/tasks/list", params={"limit": rng.choice([0, 10, 100])})
    note("list", r)
    stats["job_list"] += 1


async def job_disconnect(c, rng):
    """Open a stream, read a few events, hang up."""
    kind = rng.choice(["chat", "completion", "tmp", "task_stream"])
    k = rng.randint(1, 4)
    if kind == "chat":
        req = ("POST", "/v1/chat/completions",
               {"model": "rwkv-7", "stream": True, "max_tokens": 400,
                "messages": [{"role": "user", "content": words(rng, 20)}]})
    elif kind == "completion":
        req = ("POST", "/v1/completions", {"model": "rwkv-7", "stream": True, "max_tokens": 400,
                                           "prompt": words(rng, 20)})
    elif kind == "tmp":
        req = ("POST", "/v1/tasks/tmp", {"prompt": words(rng, 20), "max_tokens": 400,
                                         "stream": True})
    else:
        r = await c.post("/v1/tasks/create", json={"prompt": words(rng, 20), "max_tokens": 200})
        if not note("create", r):
            return
        tid = r.json()["task_id"]
        req = ("GET", f"/v1/tasks/{tid}/stream?pos=0", None)
    method, path, body = req
    n = 0
    kw = {"json": body} if body is not None else {}
    async with c.stream(method, path, **kw) as r:
        if r.status_code != 200:
            await r.aread()
            note("disconnect_" + kind, r)
            return
        note("disconnect_" + kind, r)
        async for _ in sse_events(r):
            n += 1
            if n >= k:
                break
    # leaving the block closes the unread response: the connection is dropped
    if kind == "task_stream":  # persistent task: it runs on; clean it up
        await asyncio.sleep(0.2)
        r = await c.post(f"/v1/tasks/{tid}/delete")
        note("delete", r)
    stats["job_disconnect_" + kind] += 1


async def job_state_template(c, rng):
    """create -> export_state -> import_state as a named template -> a chat from it
    (model rwkv-7:_name) -> a fork of it -> delete (force)."""
    r = await c.post("/v1/tasks/create", json={"prompt": f"User: {words(rng, 12)}\n\nAssistant:",
                                               "max_tokens": 0})
    if not note("create", r):
        return
    tid = r.json()["task_id"]
    r = await c.get(f"/v1/tasks/{tid}/export_state")
    if not note("export_state", r):
        return
    name = f"soak{rng.randrange(10**9)}"
    r2 = await c.post(f"/v1/tasks/import_state?name={name}", content=r.content,
                      headers={"content-type": "application/octet-stream"})
    if not note("import_state", r2):
        return
    tpl = "_" + name
    body = {"model": f"rwkv-7:{tpl}", "max_tokens": 12, "temperature": 0, "top_k": 0,
            "top_p": 1, "messages": [{"role": "user", "content": words(rng, 6)}]}
    await chat_once(c, body, rng.random() < 0.5)
    r = await c.post(f"/v1/tasks/{tpl}/fork?tmp=true", json={"prompt": " y", "max_tokens": 6})
    if note("fork", r):
        await wait_finished(c, r.json()["task_id"])
    note("delete_tpl", await c.post(f"/v1/tasks/{tpl}/delete?force=true"))
    note("delete", await c.post(f"/v1/tasks/{tid}/delete"))
    stats["job_state_template"] += 1


async def job_hangup_nonstream(c, rng):
    """A non-streamed request whose client gives up after ~0.3 s (its reply not read)."""
    body = {"model": "rwkv-7", "max_tokens": 2000,
            "messages": [{"role": "user", "content": words(rng, 10)}]}
    try:
        await c.post("/v1/chat/completions", json=body, timeout=rng.uniform(0.1, 0.5))
        stats["hangup_answered"] += 1
    except httpx.TimeoutException:
        stats["hangup_done"] += 1
    stats["job_hangup_nonstream"] += 1


JOBS = [(job_chat, 30), (job_completion, 18), (job_task_lifecycle, 20), (job_task_stop, 5),
        (job_tmp_stream, 10), (job_fim, 3), (job_list, 4), (job_disconnect, 10),
        (job_state_template, 3), (job_hangup_nonstream, 3)]


async def worker(i: int, url: str, stop_at: float):
    rng = random.Random(1000 + i)
    fns, weights = zip(*JOBS)
    async with httpx.AsyncClient(base_url=url, timeout=60.0) as c:
        while time.monotonic() < stop_at:
            fn = rng.choices(fns, weights)[0]
            t = time.monotonic()
            try:
                await fn(c, rng)
            except httpx.TimeoutException as e:
                stats["hang"] += 1
                problem("timeout", f"{fn.__name__}: {type(e).__name__}")
            except httpx.HTTPError as e:
                stats["http_error"] += 1
                problem("http_error", f"{fn.__name__}: {type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001
                stats["client_exception"] += 1
                problem("exception", f"{fn.__name__}: {traceback.format_exc()[-600:]}")
            latencies[fn.__name__].append(time.monotonic() - t)
            stats["jobs"] += 1


# ---------------------------------------------------------------- sampler
METRIC_KEYS = ("rwkv_queue_length", "rwkv_active_slots", "rwkv_capacity",
               "rwkv_prefix_cache_entries", "rwkv_prefix_cache_bytes",
               "rwkv_prefix_cache_evictions_total", "rwkv_generated_tokens_total",
               "rwkv_prompt_tokens_total")


def proc_sample(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                out["rss_mb"] = int(ln.split()[1]) / 1024
            elif ln.startswith("Threads:"):
                out["threads"] = int(ln.split()[1])
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


async def sample(url: str, pid: int, db: str, phase: str) -> dict:
    s = {"t": round(time.monotonic() - T0, 1), "wall": time.strftime("%H:%M:%S"), "phase": phase,
         "jobs": stats["jobs"]}
    s.update(proc_sample(pid))
    s["db_mb"] = round(sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p))
                       / 2**20, 2)
    async with httpx.AsyncClient(base_url=url, timeout=60.0) as c:
        t = time.monotonic()
        h = (await c.get("/health")).json()
        s["health_ms"] = round((time.monotonic() - t) * 1000)
        s.update(status=h["status"], active=h["active"], queue=h["queue"],
                 capacity=h["capacity"], finishing=h["finishing"],
                 unsaved=h["task_store"]["unsaved"],
                 pc_entries=h["prefix_cache"]["entries"],
                 pc_mb=round(h["prefix_cache"]["bytes"] / 2**20, 1))
        m = (await c.get("/metrics")).text
        for k in METRIC_KEYS:
            mm = re.search(rf"^{k} ([0-9.e+]+)$", m, re.M)
            if mm:
                s[k.replace("rwkv_", "")] = float(mm.group(1))
        s["metrics_lines"] = m.count("\n")
        lst = (await c.get("/v1/tasks/list", params={"limit": 0})).json()
        s["task_mem"] = lst["cpu_cache_count"]
        s["task_db"] = lst["database_count"]
    s["problems"] = sum(v for k, v in stats.items() if k.startswith("problem:"))
    return s


async def sampler(url, pid, db, out, stop_at, every):
    while time.monotonic() < stop_at:
        try:
            s = await sample(url, pid, db, "load")
            out.write(json.dumps(s) + "\n")
            out.flush()
            log("SAMPLE " + json.dumps(s))
        except Exception as e:  # noqa: BLE001
            log(f"sampler failed: {e!r}")
        await asyncio.sleep(max(0.0, min(every, stop_at - time.monotonic())))


async def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8791")
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--minutes", type=float, default=15)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--every", type=float, default=30)
    ap.add_argument("--samples", default="/tmp/h_soak/samples.jsonl")
    ap.add_argument("--log", default="/tmp/h_soak/soak.log")
    a = ap.parse_args()
    LOG = open(a.log, "a")
    out = open(a.samples, "w")
    log(f"soak start: {a}")
    stop_at = time.monotonic() + a.minutes * 60
    s = await sample(a.url, a.pid, a.db, "before")
    out.write(json.dumps(s) + "\n")
    log("SAMPLE " + json.dumps(s))
    await asyncio.gather(sampler(a.url, a.pid, a.db, out, stop_at, a.every),
                         *(worker(i, a.url, stop_at) for i in range(a.workers)))
    log("load stopped")
    for wait in (5, 25, 30, 60):
        await asyncio.sleep(wait)
        s = await sample(a.url, a.pid, a.db, f"idle")
        out.write(json.dumps(s) + "\n")
        out.flush()
        log("SAMPLE " + json.dumps(s))
    log("STATS " + json.dumps(dict(sorted(stats.items()))))
    log("STATUS " + json.dumps({f"{k[0]} {k[1]}": v for k, v in sorted(status_counts.items())}))
    for k, v in sorted(latencies.items()):
        v = sorted(v)
        log(f"LATENCY {k}: n={len(v)} median={v[len(v) // 2]:.2f}s p99={v[int(len(v) * .99)]:.2f}s "
            f"max={v[-1]:.2f}s")
    log(f"PROBLEMS {len(problems)}")
    for p in problems:
        log("  " + p)


if __name__ == "__main__":
    asyncio.run(main())
