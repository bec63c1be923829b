import sys, time, httpx
B = "http://localhost:8792"
n = int(sys.argv[1])
schema = {"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"], "additionalProperties": False} for i in range(n)]}
rf = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
r = httpx.post(B + "/v1/completions", json={"prompt": "x", "max_tokens": 4, "response_format": rf}, timeout=60)
print("comp", n, r.status_code, r.headers.get("x-should-retry"), r.text[:200])
r = httpx.post(B + "/v1/tasks/create", json={"prompt": "x", "max_tokens": 4, "response_format": rf}, timeout=60)
tid = r.json().get("task_id"); time.sleep(3)
g = httpx.get(f"{B}/v1/tasks/{tid}/get_result", timeout=60)
print("task", n, r.status_code, g.status_code, g.text[:200])
