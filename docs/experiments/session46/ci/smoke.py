import httpx, json, time, sys
u = "http://127.0.0.1:8765"
for _ in range(120):
    try:
        if httpx.get(u + "/health").status_code == 200: break
    except Exception: pass
    time.sleep(1)
c = httpx.Client(base_url=u, timeout=60)
ok = lambda name, cond: print(("PASS " if cond else "FAIL ") + name)
h = c.get("/health").json(); ok("health", h["status"] == "ok" and h["scoring"] == 0)
ok("models", c.get("/v1/models").json()["data"][0]["id"])
r = c.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "reasoning_effort": "none"}).json()
ok("chat", r["choices"][0]["message"]["content"] is not None and r["usage"]["completion_tokens"] > 0)
lines = []
with c.stream("POST", "/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "stream": True}) as s:
    lines = [l for l in s.iter_lines() if l.startswith("data:")]
ok("chat stream", lines[-1] == "data: [DONE]")
r = c.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "logprobs": True, "top_logprobs": 2}).json()
ok("chat logprobs", len(r["choices"][0]["logprobs"]["content"]) > 0)
r = c.post("/v1/completions", json={"prompt": ["The cat sat.", "A dog ran."], "echo": True, "logprobs": 1, "max_tokens": 0}).json()
ok("echo scoring list", [ch["logprobs"]["token_logprobs"][0] for ch in r["choices"]] == [None, None] and all(x is not None for x in r["choices"][0]["logprobs"]["token_logprobs"][1:]))
r = c.post("/v1/completions", json={"prompt": "def f(", "suffix": "\n", "max_tokens": 4})
ok("FIM completions", r.status_code == 200)
r = c.post("/v1/tasks/tmp", json={"prompt": "Hello", "max_tokens": 4})
ok("tasks/tmp", r.status_code == 200 and "task_id" in r.json())
t = c.post("/v1/tasks/create", json={"prompt": "System: brief.\n\n", "max_tokens": 0}).json()["task_id"]
for _ in range(50):
    if c.get(f"/v1/tasks/{t}/get_result").json()["finished"]: break
    time.sleep(0.1)
tp = c.post(f"/v1/tasks/{t}/as_template", params={"name": "smoke_tpl"}).json()
ok("as_template name", tp["task_id"] == "_smoke_tpl")
with c.stream("POST", "/v1/tasks/_smoke_tpl/fork", json={"prompt": "User: Hi\n\nAssistant:", "max_tokens": 4, "stream": True}) as s:
    fl = [l for l in s.iter_lines() if l.startswith("data:")]
ok("fork stream", fl[-1] == "data: [DONE]")
ok("422", c.post("/v1/tasks/create", json={"prompt": "x", "bogus": 1}).status_code == 422)
ok("400", c.post("/v1/chat/completions", json={"model": "rwkv-7"}).status_code == 400)
ok("400 logprobs", c.post("/v1/completions", json={"prompt": "x", "logprobs": 6}).status_code == 400)
m = c.get("/metrics").text
ok("metrics", "rwkv_scoring_jobs" in m and "rwkv_queue_length" in m)
# session 46: logit_bias, min_p, structured output, a forced tool call
r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 4, "temperature": 1.5, "logit_bias": {"38685": 100}}).json()
ok("logit_bias", r["choices"][0]["text"] == " hello" * 4)
g = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 6, "temperature": 0}).json()["choices"][0]["text"]
m1 = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 6, "temperature": 1.5, "min_p": 1, "seed": 3}).json()["choices"][0]["text"]
ok("min_p 1 is greedy", g == m1)
sch = {"type": "object", "additionalProperties": False, "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}
r = c.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "JSON"}], "max_tokens": 20, "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": sch}}}).json()
ok("json_schema", isinstance(json.loads(r["choices"][0]["message"]["content"])["ok"], bool))
tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "additionalProperties": False, "required": ["z"], "properties": {"z": {"enum": ["UTC"]}}}}}]
r = c.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": [{"role": "user", "content": "call"}], "max_tokens": 40, "tools": tools, "tool_choice": "required"}).json()
ok("forced tool call", r["choices"][0]["finish_reason"] == "tool_calls" and json.loads(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"z": "UTC"})
ok("400 response_format", c.post("/v1/completions", json={"prompt": "x", "response_format": {"type": "xml"}}).status_code == 400)
