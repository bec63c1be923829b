import sys, time, json, httpx
B = f"http://localhost:{sys.argv[1] if len(sys.argv) > 1 else 8101}"
c = httpx.Client(base_url=B, timeout=60)
def show(name, r, n=200):
    print(f"--- {name}: {r.status_code} {r.text.replace(chr(10),' ')[:n]}"); return r
P = "User: hi\n\nAssistant:"
show("unknown field (422)", c.post("/v1/tasks/create", json={"prompt": P, "max_tokens": 3, "foo": 1}))
show("'3' for max_tokens (422)", c.post("/v1/tasks/create", json={"prompt": P, "max_tokens": "3"}))
show("true for temperature (422)", c.post("/v1/tasks/create", json={"prompt": P, "max_tokens": 3, "temperature": True}))
show("1 for stream (422)", c.post("/v1/tasks/create", json={"prompt": P, "max_tokens": 3, "stream": 1}))
show("2.5 for max_tokens (422)", c.post("/v1/tasks/create", json={"prompt": P, "max_tokens": 2.5}))
r = show("3.0 for max_tokens (ok)", c.post("/v1/tasks/create", json={"prompt": P, "max_tokens": 3.0}))
tid = r.json()["task_id"]
show("max_tokens 40961 (README: refused only past max(40960, cap); served as cap)", c.post("/v1/tasks/tmp", json={"prompt": P, "max_tokens": 40960, "temperature": 0, "logit_bias": {"0": 100}}))
show("max_tokens 10**9 (422)", c.post("/v1/tasks/tmp", json={"prompt": P, "max_tokens": 10**9}))
time.sleep(1)
show("get_result", c.get(f"/v1/tasks/{tid}/get_result"))
show("status", c.get(f"/v1/tasks/{tid}/status"))
show("stream?pos=1", c.get(f"/v1/tasks/{tid}/stream?pos=1"), 400)
show("continue", c.post(f"/v1/tasks/{tid}/continue", json={"prompt": "\n\nUser: more\n\nAssistant:", "max_tokens": 40}))
show("stop", c.post(f"/v1/tasks/{tid}/stop"))
show("status after stop", c.get(f"/v1/tasks/{tid}/status"))
show("as_template bad name (422)", c.post(f"/v1/tasks/{tid}/as_template?name=bad name!"))
show("as_template name=x1", c.post(f"/v1/tasks/{tid}/as_template?name=x1"))
show("as_template name=x1 again (409)", c.post(f"/v1/tasks/{tid}/as_template?name=x1"))
show("delete template without force", c.post("/v1/tasks/_x1/delete"))
show("export_state", c.get(f"/v1/tasks/_x1/export_state"), 60)
st = c.get(f"/v1/tasks/_x1/export_state").content
print("   exported bytes", len(st), st[:8])
show("import_state name=imp", c.post("/v1/tasks/import_state?name=imp", content=st, headers={"Content-Type": "application/octet-stream"}))
show("fork _imp with seed", c.post("/v1/tasks/_imp/fork", json={"prompt": "User: x\n\nAssistant:", "max_tokens": 5, "seed": 3}))
show("fork ?tmp=true", c.post("/v1/tasks/_imp/fork?tmp=true", json={"prompt": "User: x\n\nAssistant:", "max_tokens": 5}))
show("delete template force", c.post("/v1/tasks/_x1/delete?force=true"))
# tmp task: continue/as_template after generating -> 409
r = show("tmp create", c.post("/v1/tasks/tmp", json={"prompt": P, "max_tokens": 3}))
t2 = r.json()["task_id"]; time.sleep(1)
show("tmp continue (409)", c.post(f"/v1/tasks/{t2}/continue", json={"prompt": "x", "max_tokens": 3}))
show("tmp as_template (409)", c.post(f"/v1/tasks/{t2}/as_template"))
r = show("tmp max_tokens 0", c.post("/v1/tasks/tmp", json={"prompt": P, "max_tokens": 0}))
show("tmp max_tokens 0 -> as_template ok", c.post(f"/v1/tasks/{r.json()['task_id']}/as_template"))
# fim
show("fim", c.post("/v1/tasks/fim", json={"prefix": "def f(x):\n", "suffix": "\n    return y", "max_tokens": 5}))
# list
show("list default", c.get("/v1/tasks/list"), 300)
r = show("list order=id limit=2", c.get("/v1/tasks/list?order=id&limit=2"), 300)
last = r.json()["db_tasks"][-1]
show(f"list after={last}&limit=2", c.get(f"/v1/tasks/list?after={last}&limit=2"), 300)
show("response_format on task api", c.post("/v1/tasks/tmp", json={"prompt": P, "max_tokens": 30, "response_format": {"type": "json_object"}}))
show("response_format bad (422)", c.post("/v1/tasks/tmp", json={"prompt": P, "max_tokens": 3, "response_format": {"type": "yaml"}}))
show("logit_bias bad (422)", c.post("/v1/tasks/tmp", json={"prompt": P, "max_tokens": 3, "logit_bias": {"99999": 1}}))
show("min_p", c.post("/v1/tasks/tmp", json={"prompt": P, "max_tokens": 3, "min_p": 0.5}))
show("prompt as token ids", c.post("/v1/tasks/tmp", json={"prompt": [33, 34, 35], "max_tokens": 3}))
