import json, requests, jsonschema, openai
B = "http://localhost:8792/v1"
MSG = [{"role": "user", "content": "do it"}]
S = json.load(open("/tmp/qa46b/qa/schemas.json"))
tools = [{"type": "function", "function": {"name": k, "description": "d", "parameters": s}} for k, s in S.items()]
fails = []
def raw_stream(body):
    r = requests.post(B + "/chat/completions", json=body, stream=True, timeout=120)
    evs = []
    for line in r.iter_lines():
        if not line: continue
        line = line.decode()
        assert line.startswith("data: "), line
        d = line[6:]
        evs.append(d)
    return r.status_code, evs
for tc in ("required", {"type": "function", "function": {"name": "nested"}}):
    for n in (1, 3):
        body = {"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": tc, "max_tokens": 200, "seed": 5, "n": n, "temperature": 1.2, "stream": True, "stream_options": {"include_usage": True}}
        code, evs = raw_stream(body)
        label = f"stream tc={tc if isinstance(tc,str) else 'named'} n={n}"
        if evs[-1] != "[DONE]": fails.append((label, "no DONE " + evs[-1]))
        chunks = [json.loads(e) for e in evs if e != "[DONE]"]
        per = {}
        for c in chunks:
            for ch in c["choices"]:
                d = ch["delta"]
                per.setdefault(ch["index"], []).append((d, ch["finish_reason"]))
        # non-stream equivalent
        nb = dict(body); nb.pop("stream"); nb.pop("stream_options")
        ns = requests.post(B + "/chat/completions", json=nb).json()
        for i, lst in per.items():
            tcs = [d["tool_calls"] for d, _ in lst if d.get("tool_calls")]
            other = [d for d, _ in lst if (d.get("content") or d.get("reasoning_content"))]
            fins = [f for _, f in lst if f]
            if other: fails.append((label, f"choice {i} content deltas {other[:2]}"))
            if fins != ["tool_calls"]: fails.append((label, f"choice {i} finishes {fins}"))
            first = tcs[0][0] if tcs else None
            if not first or set(first) != {"index", "id", "type", "function"} or first["index"] != 0 or first["type"] != "function" or "name" not in first["function"]:
                fails.append((label, f"first delta {first}"))
            args = "".join(t[0]["function"].get("arguments", "") for t in tcs)
            for t in tcs[1:]:
                if set(t[0]) != {"index", "function"} or set(t[0]["function"]) != {"arguments"}:
                    fails.append((label, f"later delta {t}"))
            name = first["function"]["name"]
            try: jsonschema.validate(json.loads(args), S[name])
            except Exception as e: fails.append((label, f"args {args} {e}"))
            nsf = ns["choices"][i]["message"]["tool_calls"][0]["function"]
            if (nsf["name"], json.loads(nsf["arguments"])) != (name, json.loads(args)):
                fails.append((label, f"stream {name} {args} != nonstream {nsf}"))
            if i == 0: print(label, "deltas:", [d for d, _ in lst][:4])
        if "usage" not in chunks[-1] or not chunks[-1]["usage"]: fails.append((label, "no usage chunk"))
# SDK streaming accumulation
c = openai.OpenAI(base_url=B, api_key="x", max_retries=0)
with c.beta.chat.completions.stream(model="rwkv-7", messages=MSG, tools=tools, tool_choice={"type": "function", "function": {"name": "simple"}}, max_tokens=200, seed=3) as st:
    for _ in st: pass
    fc = st.get_final_completion()
print("SDK stream final:", fc.choices[0].message.tool_calls, fc.choices[0].finish_reason)
r = c.chat.completions.create(model="rwkv-7", messages=MSG, tools=tools, tool_choice="required", max_tokens=200, seed=3)
print("SDK create:", r.choices[0].message.tool_calls[0].function, r.choices[0].finish_reason)
# pydantic_function_tool + parse w/o $defs
from pydantic import BaseModel
from typing import Literal, Optional
class Weather(BaseModel):
    city: str
    unit: Literal["c", "f"]
    days: Optional[int] = None
r = c.beta.chat.completions.parse(model="rwkv-7", messages=MSG, tools=[openai.pydantic_function_tool(Weather)], tool_choice="required", max_tokens=200, seed=3)
print("SDK parse strict tool:", r.choices[0].message.tool_calls[0].function.parsed_arguments, r.choices[0].finish_reason)
r = c.beta.chat.completions.parse(model="rwkv-7", messages=MSG, response_format=Weather, max_tokens=200, seed=3)
print("SDK parse response_format:", r.choices[0].message.parsed, r.choices[0].finish_reason)
print("\nFAILS", len(fails))
for x in fails: print(" ", x)
