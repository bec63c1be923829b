import asyncio, json, time, httpx, sys
PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8792
B = f"http://localhost:{PORT}/v1/chat/completions"
def body(i):
    if i % 2:
        return {"model": "rwkv-7", "messages": [{"role": "user", "content": f"x{i}"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required", "max_tokens": 3000, "seed": i, "stream": True}
    return {"model": "rwkv-7", "messages": [{"role": "user", "content": f"x{i}"}], "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object", "properties": {"t": {"type": "string"}}, "required": ["t"]}}}, "max_tokens": 3000, "seed": i, "stream": i % 4 == 0}
async def one(cl, i, after):
    b = body(i)
    if b["stream"]:
        n = 0
        async with cl.stream("POST", B, json=b) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    n += 1
                    if n >= after: return ("closed-stream", n)
    else:
        try:
            await asyncio.wait_for(cl.post(B, json=b), timeout=after / 10)
        except asyncio.TimeoutError:
            return ("closed-nonstream", None)
        return ("finished", None)
async def main():
    async with httpx.AsyncClient(timeout=600) as cl:
        h0 = (await cl.get(f"http://localhost:{PORT}/health")).json()
        res = await asyncio.gather(*[one(cl, i, 3 + i % 20) for i in range(32)])
        print(res)
        for t in range(30):
            await asyncio.sleep(0.5)
            h = (await cl.get(f"http://localhost:{PORT}/health")).json()
            if h["active"] == 0 and h["queue"] == 0: break
        print(f"after {0.5*(t+1):.1f}s health active={h['active']} queue={h['queue']} finishing={h['finishing']}")
        # server still fine:
        r = await cl.post(B, json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}, "max_tokens": 30})
        print("after:", r.status_code, r.json()["choices"][0])
asyncio.run(main())
