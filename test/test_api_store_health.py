"""``/health`` while the task database refuses writes (a full disk): "degraded", the tasks kept in
memory named by count and the database's error, and back to "ok" once the writes land; the
tasks' results are served all along (session 31's QA: a full disk was invisible to monitoring,
and tasks evicted meanwhile were lost)."""

from __future__ import annotations

import sqlite3
import time

from fastapi.testclient import TestClient


def _until(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_health_reports_a_database_that_refuses_writes(tiny_model_path, tmp_path, monkeypatch):
    from server.api.app import create_app
    from server.config import Settings
    from server.task import writer

    monkeypatch.setattr(writer, "RETRY_FAILED_S", 0.05)
    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"))
    with TestClient(create_app(settings)) as client:
        assert client.get("/health").json()["task_store"] == {"ok": True, "unsaved": 0,
                                                              "error": None, "damaged": None}
        store = client.app.state.runtime.manager.store
        real = store.put

        def full(*a, **k):
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(store, "put", full)
        body = {"prompt": "User: hi\n\nAssistant:", "max_tokens": 3, "temperature": 0}
        tid = client.post("/v1/tasks/create", json=body).json()["task_id"]
        _until(lambda: client.get("/health").json()["status"] == "degraded")
        h = client.get("/health").json()
        assert h["task_store"]["unsaved"] == 1 and "disk is full" in h["task_store"]["error"]
        assert client.get(f"/v1/tasks/{tid}/get_result").json()["finished"] is True
        monkeypatch.setattr(store, "put", real)
        _until(lambda: client.get("/health").json()["status"] == "ok")
        assert client.get("/health").json()["task_store"]["unsaved"] == 0
        assert store.contains(tid)


def test_a_task_whose_submission_fails_unexpectedly_is_not_left_listed(tiny_model_path, tmp_path,
                                                                       monkeypatch):
    """A fault in ``add_task`` other than the API's own refusals (a ValueError from its
    parameter check: a cap past 2**63 - 1 let such a max_tokens through) was a 500 that left
    the new task listed, PREFILL for ever, its stream hanging (session 34's review). The task
    is forgotten now; the next request is served."""
    from server.api.app import create_app
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"))
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        sched = client.app.state.runtime.scheduler
        real = sched.add_task

        def once(task):
            monkeypatch.setattr(sched, "add_task", real)
            raise ValueError("injected")

        monkeypatch.setattr(sched, "add_task", once)
        before = set(client.get("/v1/tasks/list").json()["cpu_tasks"])
        body = {"prompt": "User: hi\n\nAssistant:", "max_tokens": 3, "temperature": 0}
        for path in ("/v1/tasks/tmp", "/v1/tasks/create"):
            r = client.post(path, json=body)
            assert r.status_code == 500, r.text
            assert set(client.get("/v1/tasks/list").json()["cpu_tasks"]) == before
            monkeypatch.setattr(sched, "add_task", once)
        monkeypatch.setattr(sched, "add_task", real)
        tid = client.post("/v1/tasks/create", json=body).json()["task_id"]
        _until(lambda: client.get(f"/v1/tasks/{tid}/get_result").json()["finished"])


def test_a_request_whose_write_the_full_disk_refuses_is_a_507_and_degrades_health(
        tiny_model_path, tmp_path):
    """A request's own write refused for want of room (``as_template``, ``import_state``,
    ``delete``) was a 500 the openai SDKs retried twice, and ``/health`` stayed "ok": only the
    background writer's refusals showed there (session 72's QA, a 400 KB tmpfs). Now a 507
    ``storage_full`` with ``x-should-retry: false``, ``/health`` "degraded" naming SQLite's
    error until a write (or a delete of a row) succeeds, and the same request succeeds once
    there is room. The disk is full here by SQLite's own page limit (``max_page_count``:
    SQLITE_FULL, "database or disk is full", as from the file system)."""
    from server.api.app import create_app
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"))
    body = {"prompt": "User: hi\n\nAssistant:", "max_tokens": 0}
    with TestClient(create_app(settings)) as client:
        store = client.app.state.runtime.manager.store
        tid = client.post("/v1/tasks/create", json=body).json()["task_id"]
        _until(lambda: store.contains(tid))
        with store._lock:
            pages = store._db.execute("PRAGMA page_count").fetchone()[0]
            store._db.execute(f"PRAGMA max_page_count={pages}")
        r = client.post(f"/v1/tasks/{tid}/as_template?name=full")
        assert r.status_code == 507, r.text
        assert r.headers.get("x-should-retry") == "false"
        assert "disk is full" in r.json()["detail"], r.text
        h = client.get("/health").json()
        assert h["status"] == "degraded", h
        assert not h["task_store"]["ok"] and "disk is full" in h["task_store"]["error"], h
        assert client.get("/v1/tasks/_full/status").status_code == 404
        # a delete of no row succeeds on a full disk too: it proves nothing (the review)
        assert store.delete("TASK_never_stored") is False
        assert client.get("/health").json()["status"] == "degraded"
        with store._lock:
            store._db.execute("PRAGMA max_page_count=1073741823")
        r = client.post(f"/v1/tasks/{tid}/as_template?name=full")
        assert r.status_code == 200, r.text
        h = client.get("/health").json()
        assert h["status"] == "ok" and h["task_store"]["error"] is None, h
