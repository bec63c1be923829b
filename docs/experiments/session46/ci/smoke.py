"""Session 45's smoke (docs/experiments/session45/ci/smoke.py, run first: the same server,
its checks and helpers), then session 46's: logit_bias, min_p, structured output, a forced
tool call. Run from the repository root against run.py --demo tiny --port 8765."""
import json
import runpy

env = runpy.run_path("docs/experiments/session45/ci/smoke.py")
c, ok = env["c"], env["ok"]
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
