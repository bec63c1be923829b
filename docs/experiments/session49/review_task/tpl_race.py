import asyncio, httpx, collections, uuid
B = "http://localhost:8791/v1/tasks"
async def main():
    async with httpx.AsyncClient(timeout=60) as c:
        t = (await c.post(B + "/create", json={"prompt": "abc", "max_tokens": 0})).json()["task_id"]
        data = (await c.get(f"{B}/{t}/export_state")).content
        for rnd in range(5):
            name = "r" + uuid.uuid4().hex[:6]
            reqs = [c.post(f"{B}/{t}/as_template?name={name}") for _ in range(8)] + \
                   [c.post(f"{B}/import_state?name={name}", content=data) for _ in range(8)] + \
                   [c.post(f"{B}/_{name}/delete?force=true") for _ in range(4)] + \
                   [c.post(f"{B}/_{name}/fork", json={"max_tokens": 2}) for _ in range(4)]
            rs = await asyncio.gather(*reqs)
            print(name, collections.Counter(r.status_code for r in rs), [r.text[:80] for r in rs if r.status_code >= 500])
            st = (await c.get(f"{B}/_{name}/status")).status_code
            lst = (await c.get(B + "/list?order=id&limit=10000")).json()
            print("  final status", st, "in cpu", f"_{name}" in lst["cpu_tasks"], "in db", f"_{name}" in lst["db_tasks"])
asyncio.run(main())
