import json, sys, requests, jsonschema, time
B = "http://localhost:8792/v1"
def post(body, stream=False, timeout=120):
    return requests.post(B + "/chat/completions", json=body, stream=stream, timeout=timeout)
MSG = [{"role": "user", "content": "do it"}]

def fn(name, params=..., desc="d"):
    f = {"name": name, "description": desc}
    if params is not ...:
        f["parameters"] = params
    return {"type": "function", "function": f}

SCHEMAS = {
 "simple": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city", "unit"]},
 "nested": {"type": "object", "properties": {"user": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"], "additionalProperties": False},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3}}, "required": ["user", "tags"], "additionalProperties": False},
 "defs": {"type": "object", "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"], "additionalProperties": False}},
          "properties": {"a": {"$ref": "#/$defs/P"}, "b": {"$ref": "#/$defs/P"}}, "required": ["a", "b"], "additionalProperties": False},
 "defs_local_defs": {"type": "object", "definitions": {"Q": {"type": "string", "enum": ["q1", "q2"]}}, "properties": {"q": {"$ref": "#/definitions/Q"}}, "required": ["q"]},
 "anyof": {"type": "object", "properties": {"v": {"anyOf": [{"type": "integer"}, {"type": "null"}, {"type": "boolean"}]}, "opt": {"type": "string"}}, "required": ["v"], "additionalProperties": False},
 "empty": {},
 "noprops": {"type": "object", "properties": {}},
 "enumtop": {"type": "object", "properties": {"mode": {"enum": ["fast", "slow", 3, None]}}, "required": ["mode"]},
}

fails = []
def check(label, r, schema, expect_name):
    if r.status_code != 200:
        fails.append((label, f"HTTP {r.status_code} {r.text[:300]}")); return None
    j = r.json()
    for ch in j["choices"]:
        m = ch["message"]; fr = ch["finish_reason"]
        if fr != "tool_calls":
            fails.append((label, f"finish_reason {fr} msg={json.dumps(m)[:300]} usage={j['usage']}")); continue
        tc = m.get("tool_calls") or []
        if len(tc) != 1:
            fails.append((label, f"{len(tc)} tool_calls")); continue
        if m.get("reasoning_content"):
            fails.append((label, "reasoning present"))
        if m.get("content") not in (None, ""):
            fails.append((label, f"content {m['content']!r}"))
        f = tc[0]["function"]
        if expect_name and f["name"] not in expect_name:
            fails.append((label, f"name {f['name']} not in {expect_name}"))
        try:
            args = json.loads(f["arguments"])
        except Exception as e:
            fails.append((label, f"args not json {f['arguments']!r}")); continue
        if not isinstance(args, dict):
            fails.append((label, f"args not object {args!r}"))
        sch = schema(f["name"]) if callable(schema) else schema
        try:
            jsonschema.validate(args, sch or {"type": "object"})
        except jsonschema.ValidationError as e:
            fails.append((label, f"args invalid: {e.message} args={f['arguments'][:200]}"))
    return j

# 1. each schema, named and required
for k, s in SCHEMAS.items():
    for choice in ("named", "required"):
        tools = [fn("f_" + k, s)]
        tc = {"type": "function", "function": {"name": "f_" + k}} if choice == "named" else "required"
        for seed in (1, 2, 3):
            body = {"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": tc, "max_tokens": 400, "seed": seed, "temperature": 1.0}
            j = check(f"{k}/{choice}/seed{seed}", post(body), s, {"f_" + k})
            if j and seed == 1: print(k, choice, j["choices"][0]["message"].get("tool_calls", [{}])[0].get("function"), j["choices"][0]["finish_reason"], j["usage"])
# no parameters key
j = check("noparams", post({"model": "rwkv-7", "messages": MSG, "tools": [fn("np")], "tool_choice": "required", "max_tokens": 200}), {"type": "object"}, {"np"})
print("noparams", j and j["choices"][0]["message"])
# many tools, required -> any of them; named -> that one
tools = [fn("f_" + k, s) for k, s in SCHEMAS.items()] + [fn("np")]
smap = {"f_" + k: s for k, s in SCHEMAS.items()}; smap["np"] = {"type": "object"}
for seed in range(6):
    j = check(f"many/required/{seed}", post({"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": "required", "max_tokens": 400, "seed": seed, "temperature": 1.5}), lambda n: smap[n], set(smap))
    if j: print("many required", seed, j["choices"][0]["message"].get("tool_calls", [{}])[0].get("function", {}).get("name"), j["choices"][0]["finish_reason"])
for name in smap:
    check(f"many/named/{name}", post({"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": {"type": "function", "function": {"name": name}}, "max_tokens": 400, "seed": 5}), lambda n: smap[n], {name})
# n>1
j = check("n4", post({"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": "required", "n": 4, "max_tokens": 400, "seed": 9, "temperature": 1.2}), lambda n: smap[n], set(smap))
print("n4 names", j and [c["message"]["tool_calls"][0]["function"]["name"] for c in j["choices"] if c["message"].get("tool_calls")])
# parallel_tool_calls
for p in (True, False):
    check(f"parallel={p}", post({"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": "required", "parallel_tool_calls": p, "max_tokens": 400, "seed": 3}), lambda n: smap[n], set(smap))
# seeds reproducible
a = post({"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": "required", "max_tokens": 400, "seed": 42, "temperature": 1.0}).json()
b = post({"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": "required", "max_tokens": 400, "seed": 42, "temperature": 1.0}).json()
if a["choices"][0]["message"]["tool_calls"][0]["function"] != b["choices"][0]["message"]["tool_calls"][0]["function"]:
    fails.append(("seed repro", "differs"))
# n choice i == seed+i choice 0
n3 = post({"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": "required", "n": 3, "max_tokens": 400, "seed": 100, "temperature": 1.0}).json()
for i in range(3):
    s = post({"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": "required", "max_tokens": 400, "seed": 100 + i, "temperature": 1.0}).json()
    if s["choices"][0]["message"]["tool_calls"][0]["function"] != n3["choices"][i]["message"]["tool_calls"][0]["function"]:
        fails.append((f"n seed+{i}", f"{s['choices'][0]['message']['tool_calls'][0]['function']} vs {n3['choices'][i]['message']['tool_calls'][0]['function']}"))
# max_tokens cut
r = post({"model": "rwkv-7", "messages": MSG, "tools": [fn("f_nested", SCHEMAS["nested"])], "tool_choice": "required", "max_tokens": 5, "seed": 1})
print("max_tokens 5:", r.status_code, r.text[:500])
print("\nFAILS:", len(fails))
for f in fails: print(" ", f)
