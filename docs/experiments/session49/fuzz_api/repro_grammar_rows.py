"""Large alternations (many tools / a big enum) hit llguidance's Earley row limit (2000 items)
at the first decode step: the request gets a 500 "Generation failed", not a 400."""
import sys, httpx
B = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8792"
def tools(n):
    return [{"type": "function", "function": {"name": f"f{i}", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}} for i in range(n)]
for n in (int(a) for a in sys.argv[2:] or ["1000", "1990", "2000"]):
    r = httpx.post(B + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "tools": tools(n), "tool_choice": "required"}, timeout=60)
    print("tools", n, r.status_code, r.headers.get("x-should-retry"), r.text[:160])
    r = httpx.post(B + "/v1/completions", json={"prompt": "x", "max_tokens": 4, "response_format": {"type": "json_schema", "json_schema": {"name": "e", "schema": {"enum": [f"v{i}" for i in range(n)]}}}}, timeout=60)
    print("enum ", n, r.status_code, r.headers.get("x-should-retry"), r.text[:160])
    r = httpx.post(B + "/v1/tasks/tmp", json={"prompt": "x", "max_tokens": 4, "response_format": {"type": "json_schema", "json_schema": {"name": "e", "schema": {"enum": [f"v{i}" for i in range(n)]}}}}, timeout=60)
    tid = r.json().get("task_id")
    import time; time.sleep(3)
    g = httpx.get(f"{B}/v1/tasks/{tid}/get_result", timeout=60)
    print("task enum", n, r.status_code, g.status_code, g.text[:160])
