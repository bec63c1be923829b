import json, requests
B = "http://localhost:8792/v1"
MSG = [{"role": "user", "content": "do it"}]
exec(open("/tmp/qa46b/qa/t1_tools.py").read().split("fails = []")[0].split("def fn")[0])
def fn(name, params=..., desc="d"):
    f = {"name": name, "description": desc}
    if params is not ...: f["parameters"] = params
    return {"type": "function", "function": f}
exec("SCHEMAS" + open("/tmp/qa46b/qa/t1_tools.py").read().split("SCHEMAS", 1)[1].split("fails = []")[0])
for k in ("defs", "defs_local_defs"):
    r = requests.post(B + "/chat/completions", json={"model": "rwkv-7", "messages": MSG, "tools": [fn("f_" + k, SCHEMAS[k])], "tool_choice": "required", "max_tokens": 300, "seed": 1})
    print(k, r.status_code, r.text[:600])
tools = [fn("f_" + k, s) for k, s in SCHEMAS.items()] + [fn("np")]
r = requests.post(B + "/chat/completions", json={"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": "required", "max_tokens": 300, "seed": 1})
print("many", r.status_code, r.text[:600])
tools = [fn("f_" + k, s) for k, s in SCHEMAS.items() if not k.startswith("defs")] + [fn("np")]
r = requests.post(B + "/chat/completions", json={"model": "rwkv-7", "messages": MSG, "tools": tools, "tool_choice": "required", "max_tokens": 300, "seed": 1})
print("many-nodefs", r.status_code, r.text[:600])
