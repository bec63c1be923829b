"""Session 48's smoke (docs/experiments/session48/ci/smoke.py, which runs 47's, 46's and 45's
first), then session 49's over HTTP: schemas no reply can follow are 400s naming
response_format (chat and completions), 129 tools a 400, a forced call whose parameters nest
without end a 400 naming tools, a deleted task is a 404 (and gone from the list), /metrics is
text. Run from the repository root against run.py --demo tiny --port 8765 (a fresh
RWKV_TASK_DB_PATH)."""
import runpy

env = runpy.run_path("docs/experiments/session48/ci/smoke.py")
c, ok = env["c"], env["ok"]
for schema in ({"$ref": "#"}, {"type": "object", "required": ["a"],
                               "properties": {"a": {"$ref": "#"}}}):
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    for path, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}),
                       ("/v1/completions", {"prompt": "x"})):
        r = c.post(path, json={**body, "model": "rwkv-7", "max_tokens": 8,
                               "response_format": fmt})
        ok(f"{path} {list(schema)}: 400", r.status_code == 400
           and r.json()["error"]["param"] == "response_format"
           and "no reply can follow it" in r.json()["error"]["message"])
msgs = [{"role": "user", "content": "x"}]
tools = [{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)]
r = c.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": msgs, "tools": tools})
ok("129 tools: 400", r.status_code == 400 and r.json()["error"]["param"] == "tools")
endless = {"type": "object", "required": ["a"], "properties": {"a": {"$ref": "#"}}}
r = c.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": msgs, "tools": [
    {"type": "function", "function": {"name": "f", "parameters": endless}}],
    "tool_choice": "required"})
ok("forced call without end: 400 naming tools", r.status_code == 400
   and r.json()["error"]["param"] == "tools")
tid = c.post("/v1/tasks/create", json={"prompt": "hello", "max_tokens": 4}).json()["task_id"]
for _ in range(100):
    if c.get(f"/v1/tasks/{tid}/status").json()["status"] == 3:
        break
ok("delete: 200", c.post(f"/v1/tasks/{tid}/delete").status_code == 200)
ok("deleted: 404", c.get(f"/v1/tasks/{tid}/status").status_code == 404
   and tid not in str(c.get("/v1/tasks/list").json()))
r = c.get("/metrics")
ok("/metrics is text", r.status_code == 200 and r.headers["content-type"].startswith("text/plain"))
print("session 49 smoke done")
