"""Coverage run: forced calls (each tool, named) and json_schema replies with roomy max_tokens, counting
finish reasons and schema validations. usage: python coverage.py URL"""
import asyncio, collections, json, sys, os, random
import httpx
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import *
URL = sys.argv[1]
R = random.Random(9)
fin = collections.Counter(); probs = []

async def forced(cl, name, i):
    b = {"model": "rwkv-7", "messages": [{"role": "user", "content": R.choice(USER_MSGS)}],
         "tools": tool_list(list(TOOLS)), "tool_choice": {"type": "function", "function": {"name": name}},
         "max_tokens": 300, "temperature": R.choice([0, 1]), "seed": i, "stream": i % 2 == 0,
         "n": R.choice([1, 2])}
    if i % 3 == 0:
        b["tool_choice"] = "required"
    import soakhelpers
    st, ch, raw, u = await soakhelpers.post(cl, URL, "/v1/chat/completions", b)
    for c in ch.values():
        fin[(name if b["tool_choice"] != "required" else "required", c["finish_reason"])] += 1
        p = check_forced(c, list(TOOLS), None if b["tool_choice"] == "required" else name, 300)
        if p: probs.append((b, p))

async def js(cl, name, i):
    path = "/v1/chat/completions" if i % 2 else "/v1/completions"
    b = {"model": "rwkv-7", "max_tokens": 300, "response_format": rf_schema(name), "temperature": R.choice([0, 1]),
         "seed": i, "stream": i % 4 < 2}
    if path == "/v1/chat/completions": b["messages"] = [{"role": "user", "content": "json"}]
    else: b["prompt"] = "User: JSON\n\nAssistant:"
    import soakhelpers
    st, ch, raw, u = await soakhelpers.post(cl, URL, path, b)
    for c in ch.values():
        fin[("schema:" + name, c["finish_reason"])] += 1
        p = check_json_reply(c["content"], c["finish_reason"], SCHEMAS[name])
        if p: probs.append((b, p))

async def main():
    jobs = [(forced, n, i) for n in TOOLS for i in range(20)] + [(js, n, i) for n in SCHEMAS for i in range(20)]
    async with httpx.AsyncClient(timeout=300) as cl:
        for k in range(0, len(jobs), 24):
            await asyncio.gather(*[f(cl, n, i) for f, n, i in jobs[k:k + 24]])
    print(json.dumps({str(k): v for k, v in sorted(fin.items())}, indent=0))
    print("problems", len(probs), json.dumps(probs[:3])[:2000])
asyncio.run(main())
