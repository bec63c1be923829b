import json, sys, requests, jsonschema
B = "http://localhost:8792/v1"
MSG = [{"role": "user", "content": "do it"}]
def fn(name, params):
    return {"type": "function", "function": {"name": name, "description": "d", "parameters": params}}
S = {
 "simple": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": False},
 "nested": {"type": "object", "properties": {"user": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"], "additionalProperties": False},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3}}, "required": ["user", "tags"], "additionalProperties": False},
 "anyof": {"type": "object", "properties": {"v": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 99}, {"type": "null"}, {"type": "boolean"}]}, "opt": {"type": "string", "enum": ["x"]}}, "required": ["v"], "additionalProperties": False},
 "enumtop": {"type": "object", "properties": {"mode": {"enum": ["fast", "slow", 3, None]}}, "required": ["mode"], "additionalProperties": False},
}
tools = [fn(k, s) for k, s in S.items()]
fails = []
def calls(j, label):
    out = []
    for ch in j.get("choices", []):
        m = ch["message"]
        if ch["finish_reason"] != "tool_calls" or len(m.get("tool_calls") or []) != 1 or m.get("reasoning_content") or m.get("content"):
            fails.append((label, f"bad choice {json.dumps(ch)[:300]}")); out.append(None); continue
        f = m["tool_calls"][0]["function"]
        try: jsonschema.validate(json.loads(f["arguments"]), S[f["name"]])
        except Exception as e: fails.append((label, f"invalid {f} {e}"))
        out.append(f)
    if "choices" not in j: fails.append((label, f"no choices {j}"))
    return out
def req(**kw):
    body = {"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": "required", "max_tokens": 200, "temperature": 1.3}
    body.update(kw)
    return requests.post(B + "/chat/completions", json=body, timeout=120).json()
names = set()
for seed in range(12):
    f = calls(req(seed=seed), f"required seed {seed}")
    if f and f[0]: names.add(f[0]["name"])
print("required: names seen", names)
for n in S:
    f = calls(req(seed=7, tool_choice={"type": "function", "function": {"name": n}}), f"named {n}")
    if f[0] and f[0]["name"] != n: fails.append((f"named {n}", f"got {f[0]['name']}"))
j = req(seed=9, n=4); f4 = calls(j, "n4"); print("n4", [x and x["name"] for x in f4])
for p in (True, False): calls(req(seed=3, parallel_tool_calls=p), f"parallel {p}")
a = calls(req(seed=42), "a"); b = calls(req(seed=42), "b")
print("seed repro", a == b); 
if a != b: fails.append(("seed repro", f"{a} vs {b}"))
n3 = calls(req(seed=100, n=3), "n3")
for i in range(3):
    s = calls(req(seed=100 + i), f"seed{100+i}")
    if s[0] != n3[i]: fails.append((f"n seed+{i}", f"{s[0]} vs {n3[i]}"))
# max_tokens cut
j = req(seed=1, max_tokens=5, tool_choice={"type": "function", "function": {"name": "nested"}})
print("max_tokens=5:", json.dumps(j["choices"][0])[:300])
# greedy temperature 0
print("temp0", calls(req(temperature=0), "temp0"))
# stop string
j = req(seed=1, stop=["name"], tool_choice={"type": "function", "function": {"name": "nested"}})
print("stop='name':", json.dumps(j["choices"][0])[:300])
# logprobs on forced call
j = req(seed=1, logprobs=True, top_logprobs=2, tool_choice={"type": "function", "function": {"name": "simple"}})
print("logprobs: n entries", len(j["choices"][0]["logprobs"]["content"]), "completion_tokens", j["usage"]["completion_tokens"])
# logit_bias on forced call: ban everything plausible? bias a token hugely
j = req(seed=1, logit_bias={"0": 100}, tool_choice={"type": "function", "function": {"name": "simple"}})
print("logit_bias eot +100:", json.dumps(j["choices"][0])[:300])
j = req(seed=1, min_p=1, tool_choice={"type": "function", "function": {"name": "simple"}})
calls(j, "min_p1")
# reasoning_effort high with forced call
j = req(seed=1, reasoning_effort="high"); calls(j, "reasoning high")
print("\nFAILS", len(fails))
for x in fails: print(" ", x)
