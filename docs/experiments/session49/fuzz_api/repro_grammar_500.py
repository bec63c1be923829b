"""Findings 1-4 in one script: request-supplied grammars that compile (no 400) but fail at
decode time inside llguidance -> 500 "Generation failed" (non-stream), error event (stream),
or a 500 from get_result forever (persistent Task API task). Nothing is logged server-side.
Usage: uv run python repro_grammar_500.py [http://localhost:8792]"""
import sys, time, httpx
B = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8792"
c = httpx.Client(base_url=B, timeout=120)
def rf(schema):
    return {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
cases = {
    "1 self-referencing schema (no finite instance)": {"prompt": "x", "max_tokens": 6, "response_format": rf({"$ref": "#"})},
    "2 infinitely nested required object (CPU fast-forward)": {"prompt": "x", "max_tokens": 6, "response_format": rf({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})},
    "3 pattern with nested bounded repeats": {"prompt": "x", "max_tokens": 16, "response_format": rf({"type": "object", "properties": {"a": {"type": "string", "pattern": "(.{0,10}){100}"}}, "required": ["a"]})},
    "4a anyOf of 2100 objects": {"prompt": "x", "max_tokens": 4, "response_format": rf({"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"], "additionalProperties": False} for i in range(2100)]})},
}
for name, body in cases.items():
    r = c.post("/v1/completions", json=body)
    print(f"/v1/completions  {name}: {r.status_code} x-should-retry={r.headers.get('x-should-retry')} {r.text[:110]!r}")
tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}} for i in range(2000)]
r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "tools": tools, "tool_choice": "required"})
print(f"/v1/chat/completions 4b 2000 tools + tool_choice=required: {r.status_code} {r.text[:110]!r}")
tid = c.post("/v1/tasks/create", json={"prompt": "x", "max_tokens": 6, "response_format": rf({"$ref": "#"})}).json()["task_id"]
time.sleep(2)
for _ in range(2):
    g = c.get(f"/v1/tasks/{tid}/get_result")
    print(f"Task API {tid} get_result: {g.status_code} {g.text[:100]!r}")
