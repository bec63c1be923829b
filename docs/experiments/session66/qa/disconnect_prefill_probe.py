"""Client disconnects while a long prompt is still being prefilled, and a 200-request mixed burst
with a quarter of the streams dropped mid-way (item 4 of session 66's QA brief).
    uv run python docs/experiments/session66/qa/disconnect_prefill_probe.py http://localhost:8811
"""
import asyncio, json, random, sys, time
import httpx

URL = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8811"
c = httpx.Client(base_url=URL, timeout=300)


def health():
    h = c.get("/health").json()
    return {k: h[k] for k in ("active", "queue", "finishing", "scoring", "scheduler_alive")}


long_text = " ".join(f"word{i}" for i in range(30000))  # ~60k tokens
for path, body in (("/v1/chat/completions", {"model": "rwkv-7", "stream": True, "max_tokens": 50,
                                             "messages": [{"role": "user", "content": long_text}]}),
                   ("/v1/tasks/tmp", {"prompt": long_text, "stream": True, "max_tokens": 50}),
                   ("/v1/completions", {"model": "rwkv-7", "prompt": long_text, "max_tokens": 0, "echo": True,
                                        "logprobs": 1})):
    t0 = time.time()
    try:
        c.post(path, json=body, timeout=1.5)
    except httpx.TimeoutException:
        pass
    print(f"{path}: dropped after {time.time()-t0:.1f}s;", health())
    for i in range(60):
        h = health()
        if h["active"] + h["queue"] + h["scoring"] + h["finishing"] == 0:
            break
        time.sleep(0.5)
    print(f"   idle after {time.time()-t0:.1f}s:", h)

# a short request must still be served promptly
t0 = time.time()
r = c.post("/v1/completions", json={"model": "rwkv-7", "prompt": "hi", "max_tokens": 4})
print("short request after:", r.status_code, f"{time.time()-t0:.2f}s")


async def burst(n=200):
    async with httpx.AsyncClient(base_url=URL, timeout=600, limits=httpx.Limits(max_connections=n)) as ac:
        async def one(i):
            drop = i % 4 == 3
            body = {"model": "rwkv-7", "stream": True, "max_tokens": 30, "temperature": 0, "reasoning_effort": "none",
                    "messages": [{"role": "user", "content": f"question {i % 7}"}]}
            try:
                n_chunks, done, text = 0, False, ""
                async with ac.stream("POST", "/v1/chat/completions", json=body) as r:
                    async for line in r.aiter_lines():
                        if line.startswith("data: {"):
                            n_chunks += 1
                            d = json.loads(line[6:])
                            if d.get("choices"):
                                text += d["choices"][0]["delta"].get("content") or ""
                            if drop and n_chunks >= 3:
                                return ("dropped", i % 7, None)
                        elif line == "data: [DONE]":
                            done = True
                return (r.status_code, done, i % 7, text)
            except Exception as e:
                return ("EXC", repr(e)[:100])
        t0 = time.time()
        res = await asyncio.gather(*(one(i) for i in range(n)))
        print(f"burst {n}: {time.time()-t0:.1f}s")
        ok = [r for r in res if r[0] == 200]
        print("   completed:", len(ok), "all [DONE]:", all(r[1] for r in ok),
              "dropped:", sum(r[0] == "dropped" for r in res), "exc:", [r for r in res if r[0] == "EXC"][:3])
        by_q = {}
        for r in ok:
            by_q.setdefault(r[2], set()).add(r[3])
        print("   distinct greedy texts per prompt (1 expected):", {q: len(v) for q, v in sorted(by_q.items())})
asyncio.run(burst())
for i in range(30):
    h = health()
    if h["active"] + h["queue"] + h["finishing"] == 0:
        break
    time.sleep(0.5)
print("after burst:", h)
