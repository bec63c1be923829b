"""Schemas with no finite instance compile (no 400) but fail at the first decode step: 500."""
import sys, json, httpx
B = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8792"
for s in ({"$ref": "#"}, {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}):
    rf = {"type": "json_schema", "json_schema": {"name": "s", "schema": s}}
    r = httpx.post(B + "/v1/completions", json={"prompt": "x", "max_tokens": 6, "response_format": rf}, timeout=60)
    print(json.dumps(s), "->", r.status_code, r.headers.get("x-should-retry"), r.text[:150])
    r = httpx.post(B + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 6, "stream": True, "response_format": rf}, timeout=60)
    print("   chat stream ->", r.status_code, [l for l in r.text.splitlines() if '"error"' in l][:1])
