# constrained seeded replies under concurrency vs. each alone
import asyncio, json, sys, httpx
sys.argv = ["x", "8792", "0", "0", "64"]
src = open("/tmp/qa46b/qa/t6b_load_heavy.py").read().split("async def main")[0]
exec(src)
async def main():
    async with httpx.AsyncClient(timeout=600) as cl:
        reqs = [make(i, 7) for i in range(64)]
        for r in reqs: r[2].pop("stream", None)
        conc = await asyncio.gather(*[send(cl, r[2]) for r in reqs])
        diffs = 0
        for i, (kind, k, b) in enumerate(reqs):
            if kind in ("rf", "tool"):
                alone = await send(cl, b)
                a = alone["choices"][0]["message"]; c = conc[i]["choices"][0]["message"]
                if a != {**c, "tool_calls": [{**t, "id": a["tool_calls"][j]["id"]} for j, t in enumerate(c["tool_calls"])]} if c.get("tool_calls") else a != c:
                    diffs += 1; print("DIFF", i, kind, json.dumps(a)[:200], "|", json.dumps(c)[:200])
        print("constrained compared:", sum(1 for r in reqs if r[0] in ("rf", "tool")), "diffs:", diffs)
asyncio.run(main())
