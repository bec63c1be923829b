"""Session 50's smoke (docs/experiments/session50/ci/smoke.py, which runs 49's to 45's first),
then session 51's over HTTP: a template made from a finished task (as_template), deleted with
force and gone (404, its fork too), a new template made after it; bodies that are no UTF-8 JSON
(latin-1 bytes, gzip-compressed) are a 422 json_invalid saying why on the Task API and a 400
saying why on the chat route. Run from the repository root against run.py --demo tiny --port
8765 (a fresh RWKV_TASK_DB_PATH)."""
import gzip
import json
import runpy

env = runpy.run_path("docs/experiments/session50/ci/smoke.py")
c, ok = env["c"], env["ok"]

r = c.post("/v1/tasks/create", json={"prompt": "User: hi\n\nAssistant:", "max_tokens": 3,
                                     "temperature": 0})
tid = r.json()["task_id"]
for _ in range(200):
    if c.get(f"/v1/tasks/{tid}/status").json()["status"] == 3:
        break
tpl = c.post(f"/v1/tasks/{tid}/as_template").json()["task_id"]
ok("template made", tpl.startswith("_") and c.get(f"/v1/tasks/{tpl}/status").status_code == 200)
ok("template delete needs force", c.post(f"/v1/tasks/{tpl}/delete").status_code == 403)
ok("template deleted with force", c.post(f"/v1/tasks/{tpl}/delete?force=true").status_code == 200)
ok("deleted template: 404", c.get(f"/v1/tasks/{tpl}/status").status_code == 404
   and c.post(f"/v1/tasks/{tpl}/fork", json={"max_tokens": 1}).status_code == 404)
tpl2 = c.post(f"/v1/tasks/{tid}/as_template").json()["task_id"]
ok("a new template after it", c.get(f"/v1/tasks/{tpl2}/status").status_code == 200)

doc = {"prompt": "caf\u00e9", "max_tokens": 1}
for name, body, headers, why in (
        ("latin-1", json.dumps(doc, ensure_ascii=False).encode("latin-1"), {}, "not UTF-8"),
        ("gzip", gzip.compress(json.dumps(doc).encode()), {"content-encoding": "gzip"},
         "Content-Encoding: gzip")):
    headers = {"content-type": "application/json", **headers}
    r = c.post("/v1/tasks/tmp", content=body, headers=headers)
    err = r.json()["detail"][0] if r.status_code == 422 else {}
    ok(f"task api {name}: 422 saying why", err.get("type") == "json_invalid"
       and why in err.get("msg", ""))
    chat = {"model": "rwkv-7", "messages": [{"role": "user", "content": "caf\u00e9"}],
            "max_tokens": 1}
    raw = json.dumps(chat, ensure_ascii=False).encode("latin-1") if name == "latin-1" else \
        gzip.compress(json.dumps(chat).encode())
    r = c.post("/v1/chat/completions", content=raw, headers=headers)
    ok(f"chat {name}: 400 saying why", r.status_code == 400
       and why in r.json()["error"]["message"])
print("session 51 smoke done")
