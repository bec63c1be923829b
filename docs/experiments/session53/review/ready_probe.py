"""Session 53: a task row stored READY (its round never ran), read back by a server: its
/stream stays open (nothing will run it), get_result says not finished, continue runs it.
    PYTHONPATH=. uv run python docs/experiments/session53/review/ready_probe.py MODEL.pth DB
(a fresh DB path; MODEL: e.g. `uv run python -m server.model.random tiny.pth --preset tiny`).
Seen on 2026-12-06: status 1, finished false, "stream still open after 8 s", continue 200."""
import time, threading
import httpx
from fastapi.testclient import TestClient
from server.api.app import create_app
from server.config import Settings
from server.model.random import main as _  # noqa
import sys
path, db = sys.argv[1], sys.argv[2]
s = Settings(model_path=path, demo=None, device="cpu", api_key=None, task_db_path=db)
with TestClient(create_app(s)) as c:
    m = c.app.state.runtime.manager
    from server.task.task import Task, Status
    t = Task([1, 2, 3, 4], max_tokens=5, task_id="TASK_probe1")
    t.status = Status.READY
    m.put_task("TASK_probe1", t)
    m.flush() if hasattr(m, "flush") else None
    print("put", t.status)
with TestClient(create_app(s)) as c:
    r = c.get("/v1/tasks/TASK_probe1/status"); print("status", r.status_code, r.text[:300])
    r = c.get("/v1/tasks/TASK_probe1/get_result"); print("get_result", r.status_code, r.text[:300])
    def stream():
        with c.stream("GET", "/v1/tasks/TASK_probe1/stream") as r:
            for line in r.iter_lines():
                print("stream:", line[:100])
    th = threading.Thread(target=stream, daemon=True); th.start(); th.join(8)
    print("stream ended" if not th.is_alive() else "stream still open after 8 s")
    r = c.post("/v1/tasks/TASK_probe1/continue", json={"prompt": " hi", "max_tokens": 3}); print("continue", r.status_code, r.text[:300])
