"""16+ concurrent requests mixing constrained/biased/min_p and plain greedy rows: plain rows must equal the same request sent alone; seeded rows equal alone too. Disconnects mid-stream."""
import sys, json, asyncio, time; sys.path.insert(0, "/tmp/qa46/qa")
import httpx
from common import BASE
fails = 0
def bad(m):
    global fails; fails += 1; print("BAD", m)
rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 12}, "n": {"type": "integer"}, "e": {"enum": ["x", "y"]}}, "required": ["a", "n", "e"], "additionalProperties": False}}}
def reqs():
    out = []
    for i in range(24):
        kind = i % 6
        prompt = f"Prompt number {i % 4} about things"
        if kind == 0: b = dict(path="/v1/completions", prompt=prompt, max_tokens=40, temperature=0)
        elif kind == 1: b = dict(path="/v1/completions", prompt=prompt, max_tokens=40, response_format={"type": "json_object"}, temperature=1.0, seed=i)
        elif kind == 2: b = dict(path="/v1/chat/completions", messages=[{"role": "user", "content": prompt}], max_tokens=40, temperature=0, reasoning_effort="none")
        elif kind == 3: b = dict(path="/v1/chat/completions", messages=[{"role": "user", "content": prompt}], max_tokens=60, response_format=rf, temperature=1.0, seed=i)
        elif kind == 4: b = dict(path="/v1/completions", prompt=prompt, max_tokens=40, temperature=1.0, seed=i, min_p=0.1, logit_bias={"35": 5, "124": -100})
        else: b = dict(path="/v1/completions", prompt=prompt, max_tokens=40, temperature=0.8, seed=i, logit_bias={str(t): 50 for t in range(300, 320)})
        b["model"] = "rwkv-7"; b["_stream"] = (i % 5 == 0)
        out.append(b)
    return out
async def one(c, b):
    b = dict(b); path = b.pop("path"); stream = b.pop("_stream")
    if not stream:
        r = await c.post(path, json=b)
        j = r.json()
        ch = j["choices"][0]
        return r.status_code, (ch.get("text") if "text" in ch else ch["message"]["content"]), ch["finish_reason"]
    b["stream"] = True; text = ""; fin = None
    async with c.stream("POST", path, json=b) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                ev = json.loads(line[6:])
                if "error" in ev: return r.status_code, "ERR " + json.dumps(ev), None
                for ch in ev["choices"]:
                    text += ch.get("text") or (ch.get("delta") or {}).get("content") or ""
                    fin = ch.get("finish_reason") or fin
    return r.status_code, text, fin
async def main():
    rs = reqs()
    async with httpx.AsyncClient(base_url=BASE, timeout=300) as c:
        alone = [await one(c, b) for b in rs]
        for rnd in range(2):
            t = time.time()
            together = await asyncio.gather(*[one(c, b) for b in rs])
            print(f"round {rnd}: {time.time()-t:.1f}s")
            for i, (a, b) in enumerate(zip(alone, together)):
                if a != b: bad(f"req {i} kind {i%6} differs concurrent vs alone:\n  alone={a}\n  conc ={b}")
        for i, a in enumerate(alone):
            if i % 6 in (1, 3):
                if a[2] == "stop":
                    try: json.loads(a[1])
                    except Exception: bad(f"req {i} stop but invalid JSON {a}")
            print(i, i % 6, a[0], a[2], repr(a[1][:50]))
        # disconnects mid-stream: constrained streams cancelled after first chunk
        async def cut(b):
            b = dict(b); path = b.pop("path"); b.pop("_stream"); b["stream"] = True; b["max_tokens"] = 500
            async with c.stream("POST", path, json=b) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: {"): return "cut"
        await asyncio.gather(*[cut(b) for b in rs[:12]])
        await asyncio.sleep(2)
        h = (await c.get("/health")).json()
        print("health after cuts:", h["status"], "active", h["active"], "queue", h["queue"], "finishing", h["finishing"])
        if h["active"] or h["queue"]: bad(f"work left after disconnects {h}")
        # a plain greedy request still equals alone after all that
        again = await one(c, rs[0])
        if again != alone[0]: bad("greedy changed after disconnects")
asyncio.run(main())
print("FAILS", fails)
