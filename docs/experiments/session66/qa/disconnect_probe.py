"""Probes client disconnects mid-stream and a burst of concurrent requests (item 4 of session
66's QA brief). Against a demo server with a small batch, e.g.
    RWKV_MAX_BATCH_SIZE=4 RWKV_BUFFER_SIZE=8 RWKV_TASK_DB_PATH=/tmp/qa66/main.db \
        uv run python run.py --demo tiny --port 8811 > /tmp/qa66/main.log 2>&1 &
    uv run python docs/experiments/session66/qa/disconnect_probe.py http://localhost:8811 [N]
Then grep the server log for ERROR / Traceback. Prints /health's active/queue after each case.
"""
import asyncio, json, sys, time
import httpx

URL = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8811"
NBURST = int(sys.argv[2]) if len(sys.argv) > 2 else 100
c = httpx.Client(base_url=URL, timeout=120)


def idle(label, limit=15):
    t0 = time.time()
    while True:
        h = c.get("/health").json()
        busy = h["active"] + h["queue"] + h["finishing"]
        if busy == 0 or time.time() - t0 > limit:
            print(f"{label:40s} after {time.time()-t0:4.1f}s active={h['active']} queue={h['queue']} "
                  f"finishing={h['finishing']} alive={h['scheduler_alive']}")
            return busy == 0
        time.sleep(0.2)


def read_then_drop(method, path, body=None, n=3):
    with httpx.Client(base_url=URL, timeout=60) as cc:
        with cc.stream(method, path, json=body) as r:
            got = 0
            for line in r.iter_lines():
                if line.startswith("data:"):
                    got += 1
                    if got >= n:
                        break
    return r.status_code, got


long = {"max_tokens": 4000, "temperature": 1.0}
# 1. chat stream dropped
print(read_then_drop("POST", "/v1/chat/completions", {"model": "rwkv-7", "stream": True, **long,
      "messages": [{"role": "user", "content": "hi"}]}))
idle("chat stream dropped")
# 2. completions stream dropped
print(read_then_drop("POST", "/v1/completions", {"model": "rwkv-7", "stream": True, "prompt": "x", **long}))
idle("completions stream dropped")
# 3. n=3 chat stream dropped
print(read_then_drop("POST", "/v1/chat/completions", {"model": "rwkv-7", "stream": True, "n": 3, **long,
      "messages": [{"role": "user", "content": "hi"}]}))
idle("chat n=3 stream dropped")
# 4. tmp task stream dropped (README: stops when its creator disconnects)
print(read_then_drop("POST", "/v1/tasks/tmp", {"prompt": "x", "stream": True, **long}))
idle("tasks/tmp stream dropped")
# 5. fim stream dropped
print(read_then_drop("POST", "/v1/tasks/fim", {"prefix": "def f(", "stream": True, **long}))
idle("tasks/fim stream dropped")
# 6. persistent task: a reader of /stream drops; the task should go on (not documented to stop)
r = c.post("/v1/tasks/create", json={"prompt": "x", "max_tokens": 300, "temperature": 1.0}).json()
tid = r["task_id"]
print(read_then_drop("GET", f"/v1/tasks/{tid}/stream"))
time.sleep(0.5)
print("  persistent task after reader dropped:", c.get(f"/v1/tasks/{tid}/status").json())
idle("persistent task finished", 120)
print("  final:", c.get(f"/v1/tasks/{tid}/status").json())
# 7. create with stream=true dropped
print(read_then_drop("POST", "/v1/tasks/create", {"prompt": "x", "stream": True, **long}))
time.sleep(1)
h = c.get("/health").json(); print("  create stream dropped: active", h["active"], "queue", h["queue"])
lst = c.get("/v1/tasks/list").json()
running = [t for t in lst.get("cpu_tasks", []) if isinstance(t, dict) and t.get("status") == 2]
print("  running tasks in list:", running[:3])
for t in running:
    c.post(f"/v1/tasks/{t['task_id']}/stop")
idle("after stopping create-stream tasks")
# 8. drop before first byte: many queued streams dropped while queued behind a full batch
async def burst_drop():
    async with httpx.AsyncClient(base_url=URL, timeout=60) as ac:
        async def one(i):
            try:
                async with ac.stream("POST", "/v1/chat/completions", json={"model": "rwkv-7", "stream": True,
                        "max_tokens": 2000, "messages": [{"role": "user", "content": f"q{i}"}]}) as r:
                    async for line in r.aiter_lines():
                        break
            except Exception as e:
                return repr(e)
        tasks = [asyncio.create_task(one(i)) for i in range(20)]
        await asyncio.sleep(1.0)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
asyncio.run(burst_drop())
idle("20 queued chat streams cancelled", 30)

# 9. burst of NBURST concurrent requests of mixed kinds, all must complete correctly
async def burst():
    async with httpx.AsyncClient(base_url=URL, timeout=600, limits=httpx.Limits(max_connections=NBURST)) as ac:
        async def one(i):
            kind = i % 4
            try:
                if kind == 0:
                    r = await ac.post("/v1/chat/completions", json={"model": "rwkv-7", "max_tokens": 12, "seed": i,
                                      "messages": [{"role": "user", "content": f"hello {i}"}]})
                    j = r.json(); return r.status_code, j["usage"]["completion_tokens"], j["choices"][0]["finish_reason"]
                if kind == 1:
                    r = await ac.post("/v1/completions", json={"model": "rwkv-7", "prompt": f"p{i}", "max_tokens": 12,
                                      "temperature": 0})
                    j = r.json(); return r.status_code, j["usage"]["completion_tokens"], j["choices"][0]["finish_reason"]
                if kind == 2:
                    txt, done = "", False
                    async with ac.stream("POST", "/v1/tasks/tmp", json={"prompt": f"p{i}", "max_tokens": 12,
                                         "stream": True, "temperature": 0}) as r:
                        async for line in r.aiter_lines():
                            if line == "data: [DONE]":
                                done = True
                            elif line.startswith("data: {"):
                                txt += json.loads(line[6:]).get("data", "")
                    return r.status_code, done, len(txt) > 0
                r = await ac.post("/v1/completions", json={"model": "rwkv-7", "prompt": f"p{i}", "max_tokens": 12,
                                  "temperature": 0, "stream": True})
                return r.status_code, r.text.rstrip().endswith("data: [DONE]"), "length"
            except Exception as e:
                return "EXC", repr(e)[:120]
        t0 = time.time()
        res = await asyncio.gather(*(one(i) for i in range(NBURST)))
        print(f"burst of {NBURST}: {time.time()-t0:.1f}s")
        from collections import Counter
        print("  ", Counter(map(str, res)).most_common(10))
asyncio.run(burst())
idle("after burst", 30)
# greedy determinism under load: completions kind 1 with temperature 0 and same prompt
a = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": "p1", "max_tokens": 12, "temperature": 0}).json()
print("server still serving:", a["choices"][0]["finish_reason"])
