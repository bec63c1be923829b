"""Session 51's smoke (docs/experiments/session51/ci/smoke.py, which runs 50's to 45's first),
then session 52's over HTTP: HEAD on GET routes (health, models, a task's status and a running
task's stream) answers at once with GET's status and no body, HEAD on a POST route is a 405.
Run from the repository root against run.py --demo tiny --port 8765 (a fresh
RWKV_TASK_DB_PATH)."""
import runpy
import time

env = runpy.run_path("docs/experiments/session51/ci/smoke.py")
c, ok = env["c"], env["ok"]

for path in ("/health", "/v1/models"):
    r = c.head(path)
    ok(f"HEAD {path}", r.status_code == 200 and r.content == b"")
r = c.post("/v1/tasks/create", json={"prompt": "User: hi\n\nAssistant:", "max_tokens": 2000,
                                     "temperature": 0})
tid = r.json()["task_id"]
t0 = time.monotonic()
r = c.head(f"/v1/tasks/{tid}/stream")
quick = time.monotonic() - t0 < 5
ok("HEAD on a running stream returns at once, bodiless",
   r.status_code == 200 and r.content == b"" and quick)
r = c.head(f"/v1/tasks/{tid}/status")
ok("HEAD status", r.status_code == 200 and r.content == b"")
ok("HEAD on a POST route: 405", c.head("/v1/chat/completions").status_code == 405)
c.post(f"/v1/tasks/{tid}/stop")
