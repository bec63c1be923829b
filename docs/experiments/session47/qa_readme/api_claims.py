"""README claims against a running --demo server (port from argv)."""
import json, sys, httpx
B = f"http://localhost:{sys.argv[1] if len(sys.argv) > 1 else 8101}"
c = httpx.Client(base_url=B, timeout=60)
def show(name, r, n=220):
    body = r.text.replace("\n", " ")
    print(f"--- {name}: {r.status_code} {body[:n]}")
    return r
def chat(**kw):
    body = {"model": "rwkv-7", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}; body.update(kw)
    return c.post("/v1/chat/completions", json=body)
def comp(**kw):
    body = {"model": "rwkv-7", "prompt": "Hello", "max_tokens": 5}; body.update(kw)
    return c.post("/v1/completions", json=body)
# logprobs
show("chat top_logprobs alone (expect 400)", chat(top_logprobs=2))
r = show("chat logprobs true top_logprobs 2", chat(logprobs=True, top_logprobs=2, reasoning_effort="none"), 120)
show("chat top_logprobs 21 (expect 400)", chat(logprobs=True, top_logprobs=21))
show("completions logprobs true (expect 400)", comp(logprobs=True))
show("completions logprobs 6 (expect 400)", comp(logprobs=6))
r = show("completions logprobs 5", comp(logprobs=5), 100)
lp = r.json()["choices"][0]["logprobs"]; print("   top_logprobs keys per token:", [len(d) for d in lp["top_logprobs"]])
show("echo with suffix (expect 400?)", comp(echo=True, logprobs=1, max_tokens=0, suffix=""))
# logit_bias
show("logit_bias out of vocab (expect 400 naming logit_bias)", chat(logit_bias={"70000": 5}))
show("logit_bias value 101 (expect 400)", chat(logit_bias={"5": 101}))
show("logit_bias 301 entries (expect 400)", chat(logit_bias={str(i): 1 for i in range(301)}))
r = show("logit_bias force token 33 (=B?) +100 with reasoning_effort none", comp(logit_bias={"33": 100}, max_tokens=3, temperature=1.0), 300)
# min_p
show("min_p 1.5 (expect 400)", chat(min_p=1.5))
show("min_p 1 greedy", comp(min_p=1, max_tokens=5), 200)
# response_format
r = show("json_object", chat(response_format={"type": "json_object"}, max_tokens=60), 300)
show("json_schema", chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}, max_tokens=30), 300)
show("json_schema without object (expect 400)", chat(response_format={"type": "json_schema"}))
show("bad type (expect 400)", chat(response_format={"type": "yaml"}))
show("text ok", chat(response_format={"type": "text"}), 120)
tools = [{"type": "function", "function": {"name": "get_w", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
show("tools + response_format (expect 400)", chat(tools=tools, response_format={"type": "json_object"}))
show("tools + response_format + tool_choice none (ok)", chat(tools=tools, tool_choice="none", response_format={"type": "json_object"}, max_tokens=20), 200)
show("tool_choice required", chat(tools=tools, tool_choice="required", max_tokens=60), 400)
show("tool_choice required, bad params (expect 400 tools.0.function.parameters)", chat(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}], tool_choice="required"))
show("tool_choice without tools (ignored)", chat(tool_choice="required"), 120)
# n, seed
r = show("n=2 seed=7", comp(n=2, seed=7, max_tokens=8), 100)
a = [ch["text"] for ch in r.json()["choices"]]
r2 = comp(seed=8, max_tokens=8); print("   choice1 == seed 8 choice0:", a[1] == r2.json()["choices"][0]["text"])
show("best_of with stream (expect 400)", comp(best_of=2, stream=True))
show("best_of < n (expect 400)", comp(best_of=1, n=2))
show("best_of 3 n 1 accepted", comp(best_of=3), 100)
# lenient OpenAI: "3" for 3 and unknown fields
show("max_tokens '3' + unknown field", comp(max_tokens="3", foo_bar=1), 200)
# FIM via completions
show("completions suffix", comp(prompt="def f(x):\n", suffix="\n    return y\n", max_tokens=10), 200)
# max_tokens cap
r = show("max_tokens huge (served as cap)", comp(max_tokens=10**12, stop=None) if False else comp(max_tokens=2**63-1, temperature=0, logit_bias={"0": 100}), 200)
# models / templates
show("model rwkv-7:translator (template _translator exists -> 404 naming rwkv-7:_translator)", chat(model="rwkv-7:translator"))
show("model rwkv-7:_translator", chat(model="rwkv-7:_translator", max_tokens=5), 200)
show("model gpt-4 (served)", chat(model="gpt-4"), 120)
show("GET /v1/models/rwkv-7:_translator", c.get("/v1/models/rwkv-7:_translator"))
show("GET /v1/models/gpt-4", c.get("/v1/models/gpt-4"))
# presence penalty negative
show("presence_penalty -5 (counts as 0)", chat(presence_penalty=-5), 100)
# CORS
r = c.options("/v1/chat/completions", headers={"Origin": "http://x.example", "Access-Control-Request-Method": "POST"})
print("--- CORS preflight:", r.status_code, r.headers.get("access-control-allow-origin"))
# stream chat
with c.stream("POST", "/v1/chat/completions", json={"model": "rwkv-7", "stream": True, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "none"}) as s:
    lines = [l for l in s.iter_lines() if l]
print("--- chat stream last lines:", lines[-2:])
