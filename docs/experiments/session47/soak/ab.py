"""A/B: the same seeded requests, one at a time, against the server with fast-forward (A) and one with
guide.FF_MIN = 10**9 (B). Also a max_tokens sweep 1..40 over one forced call. Also a concurrent
(batched) pass on A compared with its alone replies.
usage: python ab.py URL_A URL_B"""
import asyncio
import json
import os
import random
import sys

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import *  # noqa

A, Bu = sys.argv[1], sys.argv[2]
R = random.Random(4747)
OUT = os.path.dirname(os.path.abspath(__file__))


def reqs():
    out = []
    for i in range(60):
        names = R.sample(list(TOOLS), R.randint(1, 4))
        forced = R.choice(names) if R.random() < 0.6 else None
        b = {"model": "rwkv-7", "messages": [{"role": "user", "content": R.choice(USER_MSGS)}],
             "tools": tool_list(names), "max_tokens": R.choice([R.randint(1, 30), R.randint(30, 200)]),
             "tool_choice": {"type": "function", "function": {"name": forced}} if forced else "required",
             "temperature": R.choice([0, 1]), "seed": R.randrange(10**6), "n": R.choice([1, 1, 2, 3])}
        if R.random() < 0.3:
            b["logit_bias"] = R.choice(BIASES[1:])
        if R.random() < 0.3:
            b["presence_penalty"] = R.choice([0, 1.0])
            b["frequency_penalty"] = R.choice([0, 0.5])
        out.append(("/v1/chat/completions", b))
    for i in range(25):
        name = R.choice(list(SCHEMAS) + [None])
        b = {"model": "rwkv-7", "messages": [{"role": "user", "content": "json"}], "max_tokens": R.randint(5, 150),
             "response_format": rf_schema(name) if name else {"type": "json_object"},
             "temperature": R.choice([0, 1]), "seed": R.randrange(10**6), "n": R.choice([1, 2])}
        out.append(("/v1/chat/completions", b))
    for i in range(20):
        name = R.choice(list(SCHEMAS))
        b = {"model": "rwkv-7", "prompt": "User: JSON\n\nAssistant:", "max_tokens": R.randint(5, 150),
             "response_format": rf_schema(name), "temperature": R.choice([0, 1]), "seed": R.randrange(10**6)}
        out.append(("/v1/completions", b))
    # stop strings that land inside forced runs (json) or inside a call (ignored there)
    for stop in ["constant", "fixed_val", "\"b\"", "}}", "ue_here"]:
        for path in ("/v1/chat/completions", "/v1/completions"):
            b = {"model": "rwkv-7", "max_tokens": 120, "response_format": rf_schema("fixed"), "stop": stop,
                 "temperature": 1, "seed": R.randrange(10**6)}
            if path == "/v1/chat/completions":
                b["messages"] = [{"role": "user", "content": "json"}]
            else:
                b["prompt"] = "User: JSON\n\nAssistant:"
            out.append((path, b))
        out.append(("/v1/chat/completions", {"model": "rwkv-7", "messages": [{"role": "user", "content": "mode"}],
                    "tools": tool_list(["set_mode"]), "tool_choice": "required", "stop": stop,
                    "max_tokens": 120, "temperature": 1, "seed": R.randrange(10**6)}))
    # Task API with repetition penalty / decay
    for i in range(12):
        b = {"prompt": "User: JSON\n\nAssistant:", "max_tokens": R.randint(10, 120), "stream": True,
             "response_format": rf_schema(R.choice(list(SCHEMAS))), "temperature": 1, "seed": R.randrange(10**6),
             "presence_penalty": R.choice([0, 0.5, 2.0]), "repetition_penalty": R.choice([0, 0.5, 1.5]),
             "penalty_decay": R.choice([1.0, 0.99, 0.9])}
        out.append(("/v1/tasks/tmp", b))
    base = {"model": "rwkv-7", "messages": [{"role": "user", "content": "Set the mode."}],
            "tools": tool_list(["set_mode", "get_weather"]),
            "tool_choice": {"type": "function", "function": {"name": "set_mode"}}, "temperature": 1, "seed": 5}
    for mt in range(1, 41):
        out.append(("/v1/chat/completions", dict(base, max_tokens=mt)))
    return out


async def one(cl, url, path, body):
    if path == "/v1/tasks/tmp":
        text, tid = "", None
        async with cl.stream("POST", url + path, json=body) as resp:
            if resp.status_code != 200:
                return {"status": resp.status_code}
            async for ev in sse_events(resp):
                if isinstance(ev, dict):
                    text += ev.get("data", "")
                    tid = ev.get("task_id", tid)
        st = (await cl.get(f"{url}/v1/tasks/{tid}/status")).json()
        return {"choices": [text], "usage": st.get("generated_buf")}
    r = await cl.post(url + path, json=body)
    if r.status_code != 200:
        return {"status": r.status_code, "text": r.text[:300]}
    j = r.json()
    if path.endswith("chat/completions"):
        ch = [comparable(norm_chat_choice(c)) for c in j["choices"]]
    else:
        ch = [(c["text"], c["finish_reason"]) for c in j["choices"]]
    return {"choices": ch, "usage": j["usage"]["completion_tokens"]}


async def main():
    rs = reqs()
    async with httpx.AsyncClient(timeout=300) as cl:
        ra = [await one(cl, A, p, b) for p, b in rs]
        rb = [await one(cl, Bu, p, b) for p, b in rs]
        # the same requests all at once on A (batched, fast-forward under load)
        rc = []
        for k in range(0, len(rs), 24):
            rc += await asyncio.gather(*[one(cl, A, p, b) for p, b in rs[k:k + 24]])
    diffs = []
    for i, ((p, b), x, y, z) in enumerate(zip(rs, ra, rb, rc)):
        if x != y or x != z:
            diffs.append({"i": i, "path": p, "body": b, "ff_alone": x, "noff_alone": y, "ff_batched": z,
                          "ff_vs_noff": x != y, "alone_vs_batched": x != z})
    json.dump({"n": len(rs), "diffs": diffs, "ff": ra, "noff": rb}, open(f"{OUT}/ab_result.json", "w"), indent=1,
              ensure_ascii=False)
    print(f"{len(rs)} requests; ff vs no-ff differ: {sum(d['ff_vs_noff'] for d in diffs)}; "
          f"ff alone vs batched differ: {sum(d['alone_vs_batched'] for d in diffs)}")
    for d in diffs[:10]:
        print(json.dumps({k: d[k] for k in ("i", "path", "ff_alone", "noff_alone", "ff_batched")})[:1500])
    # the sweep
    for i, ((p, b), x) in enumerate(zip(rs, ra)):
        if "set_mode" in json.dumps(b.get("tool_choice")) and b.get("seed") == 5:
            print("sweep", b["max_tokens"], x["choices"][0][3], x["usage"], repr((x["choices"][0][0] or str(x["choices"][0][2]))[:90]))


asyncio.run(main())
