"""Review experiment: a grammar-engine fault under the Task API (create -> error; then
status, stream, get_result, continue), and what the task's history holds."""
import json, time

from constrained_cases import SCHEMA
from openai_helpers import http, server  # noqa: F401
from test_constrained import _Faulty

from server.task.constraint import Constraint


def test_task_api_fault(http, monkeypatch, tiny_loader):
    made = Constraint.__init__

    def faulty(self, *a, **kw):
        made(self, *a, **kw)
        self._matcher = _Faulty(self._matcher, "consume_token", 3)
    monkeypatch.setattr(Constraint, "__init__", faulty)
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}
    hot = dict(temperature=1.0, top_k=0, top_p=1, seed=3)
    r = http.post("/v1/tasks/create", json={"prompt": "User: x\n\nAssistant:", "max_tokens": 40,
                                            "response_format": fmt, **hot})
    tid = r.json()["task_id"]
    for _ in range(300):
        st = http.get(f"/v1/tasks/{tid}/status").json()
        if st["status"] not in (0, 1, 2) or True:
            res = http.get(f"/v1/tasks/{tid}/get_result")
            if res.status_code != 200 or res.json()["finished"]:
                break
        time.sleep(0.05)
    print("STATUS", st)
    print("GET_RESULT", res.status_code, res.text[:300])
    s = http.get(f"/v1/tasks/{tid}/stream")
    print("STREAM", s.status_code, s.text[-400:])
    rt = http.app.state.task_service if hasattr(http, "app") else None
    monkeypatch.undo()
    c = http.post(f"/v1/tasks/{tid}/continue", json={"prompt": " more", "max_tokens": 3,
                                                      "temperature": 0})
    print("CONTINUE", c.status_code, c.text[:300])
    for _ in range(200):
        res2 = http.get(f"/v1/tasks/{tid}/get_result")
        if res2.status_code != 200 or res2.json()["finished"]:
            break
        time.sleep(0.05)
    print("RESULT2", res2.status_code, res2.text[:300])
    # what does the task's history hold? export/history route if any
    for path in (f"/v1/tasks/{tid}/history", f"/v1/tasks/{tid}/export"):
        h = http.get(path)
        print("GET", path, h.status_code, h.text[:200])
