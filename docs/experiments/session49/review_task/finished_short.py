# get_result may say finished: true with a result that lacks the round's last tokens: it reads
# the tokens, then the status (TaskService.result). Many pollers; the first "finished" reply of
# each task is compared with a later one.
import asyncio, httpx, sys, time
B = "http://localhost:8791/v1/tasks"
async def one(c, i, stats):
    r = await c.post(B + "/create", json={"prompt": f"Task {i}:", "max_tokens": 1 + i % 7, "temperature": 0})
    t = r.json()["task_id"]
    first = None
    while first is None:
        j = (await c.get(f"{B}/{t}/get_result")).json(); stats["polls"] += 1
        s = (await c.get(f"{B}/{t}/status")).json(); stats["polls"] += 1
        if s["status"] == 3 and s["generated_buf"] < (1 + i % 7) and "short_status" not in stats:
            pass
        if j["finished"]: first = j
    last = (await c.get(f"{B}/{t}/get_result")).json()
    if first["result"] != last["result"]:
        stats["bad"].append((t, first["result"], last["result"]))
async def main(n):
    stats = {"polls": 0, "bad": []}
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=200)) as c:
        for k in range(0, n, 100):
            await asyncio.gather(*[one(c, i, stats) for i in range(k, k + 100)])
    print("tasks", n, "polls", stats["polls"], "finished-but-short replies:", len(stats["bad"]), stats["bad"][:3])
asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
