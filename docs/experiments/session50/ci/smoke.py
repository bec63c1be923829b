"""Session 49's smoke (docs/experiments/session49/ci/smoke.py, which runs 48's to 45's first),
then session 50's over HTTP: a persistent task with penalty_decay 0.5 and penalties generates,
is continued with a prompt and generates again (the decay now runs after each accepted step).
Run from the repository root against run.py --demo tiny --port 8765 (a fresh
RWKV_TASK_DB_PATH)."""
import runpy

env = runpy.run_path("docs/experiments/session49/ci/smoke.py")
c, ok = env["c"], env["ok"]


def finished(tid):
    for _ in range(200):
        if c.get(f"/v1/tasks/{tid}/status").json()["status"] == 3:
            return True
    return False


r = c.post("/v1/tasks/create", json={"prompt": "User: hi\n\nAssistant:", "max_tokens": 6,
                                     "presence_penalty": 1.0, "repetition_penalty": 0.5,
                                     "penalty_decay": 0.5, "temperature": 0})
tid = r.json()["task_id"]
ok("decay 0.5: created", r.status_code == 200 and finished(tid))
r = c.post(f"/v1/tasks/{tid}/continue", json={"prompt": "\n\nUser: more\n\nAssistant:",
                                              "max_tokens": 4})
ok("decay 0.5: continued", r.status_code == 200 and finished(tid)
   and c.get(f"/v1/tasks/{tid}/get_result").json()["finished"])
print("session 50 smoke done")
