"""Time and size of a Task API 422 for a body of 10,000 and 100,000 unknown fields (session 41),
through the app in process (TestClient, tiny demo model).

    PYTHONPATH=. uv run python docs/experiments/session41/cpu/many_unknown_fields.py
"""
import time, json, sys
from fastapi.testclient import TestClient
from server.api.app import create_app
from server.config import Settings
s = Settings(demo="tiny", device="cpu", api_key=None, task_db_path=":memory:")
with TestClient(create_app(s)) as c:
    for n in (10000, 100000):
        body = {"prompt": "x", "max_tokens": 1, **{f"u{i}": 1 for i in range(n)}}
        raw = json.dumps(body)
        t = time.perf_counter()
        r = c.post("/v1/tasks/tmp", content=raw, headers={"content-type": "application/json"})
        print(n, r.status_code, len(r.content), f"{time.perf_counter() - t:.2f}s", r.text[:200])
