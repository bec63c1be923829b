import json, requests, jsonschema
B = "http://localhost:8792/v1/chat/completions"
tree = {"type": "object", "properties": {"v": {"enum": [1]}, "kids": {"type": "array", "items": {"$ref": "#"}, "minItems": 1, "maxItems": 1}},
        "required": ["v"], "additionalProperties": False}
for seed in range(10):
    r = requests.post(B, json={"model": "rwkv-7", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "tree", "parameters": tree}}],
                               "tool_choice": "required", "max_tokens": 200, "seed": seed, "temperature": 2.0, "top_k": 0, "top_p": 1}).json()
    ch = r["choices"][0]
    if ch["finish_reason"] == "tool_calls":
        a = ch["message"]["tool_calls"][0]["function"]["arguments"]
        try: jsonschema.validate(json.loads(a), tree); ok = "VALID"
        except jsonschema.ValidationError as e: ok = "INVALID: " + e.message[:100]
        print(seed, a, ok)
    else: print(seed, ch["finish_reason"], json.dumps(ch["message"])[:200])
