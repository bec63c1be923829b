"""Mixed load for DURATION s at concurrency 4; sample server RSS, task counts, cache every 15 s."""
import asyncio, random, sys, time, httpx, os
B = sys.argv[3] if len(sys.argv) > 3 else "http://localhost:8792"; PID = int(sys.argv[1]); DUR = float(sys.argv[2])
def rss():
    return int(open(f"/proc/{PID}/status").read().split("VmRSS:")[1].split()[0]) // 1024
async def worker(c, stop):
    i = 0
    while time.time() < stop:
        i += 1
        k = random.randrange(8)
        try:
            if k == 0: await c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": f"hi {random.random()}"}], "max_tokens": 4})
            elif k == 1:
                async with c.stream("POST", "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x" * random.randrange(1, 300)}], "max_tokens": 30, "stream": True}) as r:
                    async for _ in r.aiter_lines(): break
            elif k == 2: await c.post("/v1/completions", json={"prompt": ["a", "b"], "max_tokens": 3, "echo": True, "logprobs": 2})
            elif k == 3:
                r = await c.post("/v1/tasks/tmp", json={"prompt": f"t{random.random()}", "max_tokens": 3})
            elif k == 4:
                r = await c.post("/v1/tasks/create", json={"prompt": f"t{random.random()}", "max_tokens": 3})
                tid = r.json()["task_id"]; await asyncio.sleep(0.2)
                await c.post(f"/v1/tasks/{tid}/fork?tmp=true", json={"max_tokens": 2})
                await c.post(f"/v1/tasks/{tid}/delete")
            elif k == 5: await c.post("/v1/completions", json={"prompt": "q", "max_tokens": 4, "response_format": {"type": "json_object"}})
            elif k == 6: await c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "z"}], "max_tokens": 3, "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}], "tool_choice": "required"})
            else: await c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "q"}], "max_tokens": 3, "n": 4, "logprobs": True, "top_logprobs": 5})
        except Exception as e:
            print("EXC", k, repr(e)[:100])
async def main():
    stop = time.time() + DUR
    async with httpx.AsyncClient(base_url=B, timeout=30) as c:
        ws = [asyncio.create_task(worker(c, stop)) for _ in range(4)]
        t0 = time.time()
        while time.time() < stop:
            h = (await c.get("/health")).json(); l = (await c.get("/v1/tasks/list")).json()
            print(f"t={time.time()-t0:5.0f}s rss={rss()}MB cpu_tasks={l['cpu_cache_count']} db={l['database_count']} cache_entries={h['prefix_cache'].get('entries')} cache_MB={h['prefix_cache'].get('bytes',0)>>20} active={h['active']}", flush=True)
            await asyncio.sleep(15)
        await asyncio.gather(*ws)
        await asyncio.sleep(5)
        h = (await c.get("/health")).json(); l = (await c.get("/v1/tasks/list")).json()
        print(f"end rss={rss()}MB cpu_tasks={l['cpu_cache_count']} db={l['database_count']} active={h['active']} queue={h['queue']}")
asyncio.run(main())
