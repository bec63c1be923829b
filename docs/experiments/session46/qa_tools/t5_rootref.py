import json, requests, jsonschema
B = "http://localhost:8792/v1/chat/completions"
tree = {"type": "object", "properties": {"v": {"enum": [1, 2]}, "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 1}},
        "required": ["v", "kids"], "additionalProperties": False}
for seed in range(6):
    r = requests.post(B, json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "tree", "parameters": tree}}],
                               "tool_choice": "required", "max_tokens": 200, "seed": seed, "temperature": 1.0}).json()
    ch = r["choices"][0]
    if ch["finish_reason"] == "tool_calls":
        a = ch["message"]["tool_calls"][0]["function"]["arguments"]
        try: jsonschema.validate(json.loads(a), tree); ok = "VALID"
        except jsonschema.ValidationError as e: ok = "INVALID: " + e.message[:100]
        print(seed, a, ok)
    else: print(seed, ch["finish_reason"], json.dumps(ch["message"])[:200])
# same schema via response_format
r = requests.post(B, json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": tree}}, "max_tokens": 200, "seed": 1}).json()
print("response_format:", r["choices"][0]["message"]["content"], r["choices"][0]["finish_reason"])
# non-object parameters
for p in ({"type": "array", "items": {"enum": [1, 2]}, "minItems": 1, "maxItems": 2}, {"enum": ["a", "b"]}, {"type": "boolean"}):
    r = requests.post(B, json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": p}}], "tool_choice": "required", "max_tokens": 60, "seed": 1})
    j = r.json(); print("params", p, "->", r.status_code, json.dumps(j["choices"][0] if "choices" in j else j)[:300])
