import asyncio, json, sys, time, random, httpx, jsonschema
PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8792
PID = int(sys.argv[2]) if len(sys.argv) > 2 else None
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
N = int(sys.argv[4]) if len(sys.argv) > 4 else 64
B = f"http://localhost:{PORT}/v1"
S = json.load(open("/tmp/qa46b/qa/schemas.json"))
RF = {
 "obj": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 1000}, "ok": {"type": "boolean"}, "kind": {"enum": ["x", "y", "z"]}}, "required": ["id", "ok", "kind"], "additionalProperties": False},
 "arr": {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 2, "maxItems": 5}}, "required": ["xs"], "additionalProperties": False},
 "str": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^[a-c]{1,6}$"}}, "required": ["s"], "additionalProperties": False},
}
tools = [{"type": "function", "function": {"name": k, "description": "d", "parameters": s}} for k, s in S.items()]
def rss():
    if not PID: return None
    for l in open(f"/proc/{PID}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
def make(i, rnd):
    kind = i % 4
    if i % 8 == 2: kind = 0
    if i % 8 == 6: kind = 1
    prompt = f"request {i % 16} about topic {i % 7}"
    base = {"model": "rwkv-7", "messages": [{"role": "user", "content": prompt}], "max_tokens": 60 + (i % 3) * 30, "seed": i + 1000 * rnd}
    if kind == 0:
        k = list(RF)[i % 3]
        if i % 5 == 0:
            return ("rf", "any", {**base, "response_format": {"type": "json_object"}, "temperature": 1.0, "max_tokens": 200, "stream": i % 10 == 0})
        b = {**base, "response_format": {"type": "json_schema", "json_schema": {"name": k, "schema": RF[k]}}, "temperature": 1.0}
        return ("rf", k, b)
    if kind == 1:
        tc = "required" if i % 2 else {"type": "function", "function": {"name": list(S)[i % 4]}}
        return ("tool", tc, {**base, "tools": tools, "tool_choice": tc, "temperature": 1.0, "stream": (i % 8 == 1)})
    if kind == 2:
        return ("greedy", None, {**base, "temperature": 0, "reasoning_effort": "none", "max_tokens": 40})
    return ("greedy_c", None, {"model": "rwkv-7", "prompt": prompt, "max_tokens": 40, "temperature": 0})
async def send(cl, b):
    url = B + ("/completions" if "prompt" in b else "/chat/completions")
    if b.get("stream"):
        args = ""; name = None; fin = None; evs = []; content = ""
        async with cl.stream("POST", url, json=b) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    d = line[6:]; evs.append(d)
                    if d == "[DONE]": continue
                    j = json.loads(d)
                    if "error" in j: return {"error": j}
                    for ch in j["choices"]:
                        for t in ch["delta"].get("tool_calls") or []:
                            if "id" in t: name = t["function"]["name"]
                            args += t["function"].get("arguments", "")
                        content += ch["delta"].get("content") or ""
                        fin = ch["finish_reason"] or fin
        return {"choices": [{"finish_reason": fin, "message": {"tool_calls": [{"function": {"name": name, "arguments": args}}] if name else None, "content": content if not name else None}}], "_done": evs[-1] == "[DONE]"}
    r = await cl.post(url, json=b)
    if r.status_code != 200: return {"error": r.status_code, "text": r.text[:300]}
    return r.json()
def text(j):
    ch = j["choices"][0]
    return ch.get("text") if "text" in ch else ch["message"].get("content")
async def main():
    fails = []
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=200)) as cl:
        reqs = [make(i, 0) for i in range(N)]
        base = {}
        for i, (kind, _, b) in enumerate(reqs):
            if kind.startswith("greedy"):
                base[i] = text(await send(cl, b))
        print("baselines", len(base), "rss", rss(), flush=True)
        for rnd in range(ROUNDS):
            reqs = [make(i, rnd) for i in range(N)]
            random.Random(rnd).shuffle(order := list(range(N)))
            t0 = time.time()
            res = await asyncio.gather(*[send(cl, reqs[i][2]) for i in order])
            res = dict(zip(order, res))
            counts = {}
            for i, j in res.items():
                kind, k, b = reqs[i]
                if "error" in j: fails.append((rnd, i, kind, j)); continue
                ch = j["choices"][0]; fr = ch["finish_reason"]
                counts[(kind, fr)] = counts.get((kind, fr), 0) + 1
                if kind == "rf":
                    c = ch["message"]["content"]
                    if fr == "stop":
                        try: jsonschema.validate(json.loads(c), RF[k] if k != "any" else {"type": "object"})
                        except Exception as e: fails.append((rnd, i, kind, f"invalid {c!r} {e}"))
                    elif fr != "length": fails.append((rnd, i, kind, fr))
                elif kind == "tool":
                    if fr == "tool_calls":
                        f = ch["message"]["tool_calls"][0]["function"]
                        if isinstance(k, dict) and f["name"] != k["function"]["name"]: fails.append((rnd, i, kind, f"name {f['name']}"))
                        try: jsonschema.validate(json.loads(f["arguments"]), S[f["name"]])
                        except Exception as e: fails.append((rnd, i, kind, f"invalid {f} {e}"))
                    elif fr != "length": fails.append((rnd, i, kind, fr))
                    if b.get("stream") and not j.get("_done"): fails.append((rnd, i, kind, "no DONE"))
                else:
                    if text(j) != base[i]: fails.append((rnd, i, kind, f"greedy differs: {text(j)[:60]!r} vs {base[i][:60]!r}"))
            await asyncio.sleep(3)
            h = (await cl.get(f"http://localhost:{PORT}/health")).json()
            print(f"round {rnd}: {time.time()-t0:.1f}s counts={sorted(counts.items())} health active={h['active']} queue={h['queue']} finishing={h['finishing']} rss={rss()}MB fails so far={len(fails)}", flush=True)
    print("FAILS", len(fails))
    for f in fails[:30]: print(" ", f)
asyncio.run(main())
