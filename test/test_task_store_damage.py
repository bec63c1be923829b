"""The task database's files as operators leave them, and a damaged file while serving
(session 41's QA): a database with a second hard link, and a WAL whose database was moved away,
are refused at opening (each lost acknowledged tasks); a lock file that cannot be made is
logged; a read that finds the file damaged leaves /v1/models working, the damaged row deletable
and /health "degraded"."""

from __future__ import annotations

import os
import time
import sqlite3

import pytest
from fastapi.testclient import TestClient

from server.task.store import TaskStore, TaskStoreError


def test_a_database_with_a_second_hard_link_is_refused(tmp_path):
    """A server on ``h2.db``, a hard link of ``h.db``, was not refused beside one on ``h.db``
    (the lock is ``<real path>.lock``, and SQLite keeps a -wal per name): the second one's
    checkpoint overwrote the first one's rows. Both names are refused while both exist."""
    first = tmp_path / "h.db"
    TaskStore(first).close()
    os.link(first, tmp_path / "h2.db")
    for name in ("h.db", "h2.db"):
        with pytest.raises(TaskStoreError, match="2 hard links"):
            TaskStore(tmp_path / name)
    os.unlink(tmp_path / "h2.db")
    TaskStore(first).close()


def test_a_wal_without_its_database_is_refused_and_kept(tmp_path):
    """After a kill -9 the rows of ``mv.db`` sat in ``mv.db-wal``; with ``mv.db`` moved aside
    (the advice for a damaged file), the new database made at the path truncated that WAL and
    the tasks could not be recovered. Now opening refuses, naming the WAL, and leaves it; the
    moved file back in place reads the rows."""
    path = tmp_path / "mv.db"
    store = TaskStore(path)
    store.put("_kept", '{"x": 1}', b"abc", is_template=True)
    holder = sqlite3.connect(path)  # (a reader open at exit: the WAL is not checkpointed away)
    holder.execute("SELECT 1 FROM tasks").fetchall()
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM tasks").fetchall()
    wal = tmp_path / "mv.db-wal"
    saved = {n: (tmp_path / n).read_bytes() for n in ("mv.db", "mv.db-wal")}
    holder.close()
    store.close()
    for n in ("mv.db", "mv.db-wal", "mv.db-shm"):
        (tmp_path / n).unlink(missing_ok=True)
    wal.write_bytes(saved["mv.db-wal"])  # as a kill -9 left them, mv.db moved aside
    assert wal.stat().st_size > 0
    with pytest.raises(TaskStoreError, match="mv.db-wal") as e:
        TaskStore(path)
    assert "Move that database back" in str(e.value)
    assert wal.read_bytes() == saved["mv.db-wal"] and not path.exists()
    path.write_bytes(saved["mv.db"])  # moved back: the WAL's rows are read
    back = TaskStore(path)
    try:
        assert back.get("_kept") == ('{"x": 1}', b"abc")
    finally:
        back.close()


def test_a_wal_without_its_database_is_refused_through_a_symlink(tmp_path):
    """SQLite keeps the -wal beside the file a symbolic link names: the check looked beside
    the link, and a store opened through it over a moved database truncated the real -wal
    (session 41's review)."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link.db").symlink_to(real / "t.db")
    (real / "t.db-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(60))
    with pytest.raises(TaskStoreError, match="t.db-wal"):
        TaskStore(tmp_path / "link.db")
    assert (real / "t.db-wal").stat().st_size == 64


def test_a_lock_file_that_cannot_be_made_is_logged(tmp_path, monkeypatch):
    """Where ``<file>.lock`` could not be made (a read-only folder holding the database), the
    one-server guard was off without a word."""
    from loguru import logger

    real_open = os.open

    def no_lock(path, *a, **k):
        if str(path).endswith(".lock"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", no_lock)
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    try:
        TaskStore(tmp_path / "r.db").close()
    finally:
        logger.remove(sink)
    assert any("would not be refused" in m and "r.db.lock" in m for m in lines)


def _damage_index(db_path, index: str) -> None:
    """Overwrite the root page of ``index`` with garbage (SQLite: "malformed" when it is read)."""
    with sqlite3.connect(db_path) as db:
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name=?", (index,)).fetchone()[0]
        size = db.execute("PRAGMA page_size").fetchone()[0]
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(db_path, "r+b") as f:
        f.seek((root - 1) * size)
        f.write(b"\xa5" * size)


def test_a_damaged_database_leaves_models_working_and_health_degraded(tiny_model_path,
                                                                      tmp_path):
    """A file with damaged pages started silently; /v1/models was a 500 on every call (the UIs
    that list models broke) and /health said "ok". Now the server starts (its log says DAMAGED),
    /v1/models lists the model, /health says "degraded" naming the damage, and generation goes
    on."""
    from server.api.app import create_app
    from server.config import Settings

    db = tmp_path / "t.db"
    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(db))
    with TestClient(create_app(settings)) as client:
        body = {"prompt": "User: hi\n\nAssistant:", "max_tokens": 0}
        tid = client.post("/v1/tasks/create", json=body).json()["task_id"]
        assert client.post(f"/v1/tasks/{tid}/as_template").status_code == 200
    _damage_index(db, "tasks_age")
    with TestClient(create_app(settings)) as client:  # (the start-up's count finds it)
        r = client.get("/v1/models")
        assert r.status_code == 200
        assert "rwkv-7" in [m["id"] for m in r.json()["data"]]
        health = client.get("/health").json()
        assert health["status"] == "degraded"
        assert "malformed" in health["task_store"]["damaged"]
        chat = {"model": "rwkv-7", "max_tokens": 3, "temperature": 0,
                "messages": [{"role": "user", "content": "hi"}]}
        assert client.post("/v1/chat/completions", json=chat).status_code == 200


def _served(tiny_model_path, tmp_path) -> TestClient:
    from server.api.app import create_app
    from server.config import Settings

    return TestClient(create_app(Settings(model_path=tiny_model_path, demo=None, device="cpu",
                                          api_key=None, task_db_path=str(tmp_path / "t.db"))))


def _stored_template(client) -> tuple[str, str]:
    """(a task, a template made from it), the template stored and out of memory (the next
    read of it goes to the database)."""
    body = {"prompt": "User: hi\n\nAssistant:", "max_tokens": 0}
    tid = client.post("/v1/tasks/create", json=body).json()["task_id"]
    tpl = client.post(f"/v1/tasks/{tid}/as_template").json()["task_id"]
    manager = client.app.state.runtime.manager
    manager.flush()
    with manager._lock:
        manager._templates.pop(tpl)
    return tid, tpl


def _damaged(read, task_id: str):
    """``read`` (a TaskStore read) failing as SQLite does on a damaged page for ``task_id``."""
    def go(tid, *a, **k):
        if tid == task_id:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return read(tid, *a, **k)
    return go


def test_a_row_on_a_damaged_page_can_be_deleted(tiny_model_path, tmp_path, monkeypatch):
    """A template whose row SQLite read as "malformed": status, fork and delete?force=true were
    500s (the advice, moving the file aside, lost every good row too). Reading it is a 500
    saying it can only be deleted, and deleting it works."""
    with _served(tiny_model_path, tmp_path) as client:
        tid, tpl = _stored_template(client)
        store = client.app.state.runtime.manager.store
        monkeypatch.setattr(store, "get", _damaged(store.get, tpl))
        monkeypatch.setattr(store, "get_meta", _damaged(store.get_meta, tpl))
        r = client.get(f"/v1/tasks/{tpl}/status")
        assert r.status_code == 500 and "can only be deleted" in r.text and "t.db" in r.text
        assert client.post(f"/v1/tasks/{tpl}/delete").status_code == 403  # (still a template)
        assert client.post(f"/v1/tasks/{tpl}/delete?force=true").status_code == 200
        assert not store.contains(tpl)
        assert client.get("/health").json()["status"] == "degraded"
        assert client.get(f"/v1/tasks/{tid}/status").status_code == 200


def test_a_stored_round_that_never_ran_is_a_409_to_stream_and_runs_on_continue(tiny_model_path,
                                                                                tmp_path):
    """A row stored READY (its round never ran: a continue that landed between a round's end
    and its write, then a kill -9; or an SDK's ``put_task`` of a task never run), read back
    by a server: nothing runs it, and its ``/stream`` stayed open for ever (session 53's
    review, ``docs/experiments/session53/review/ready_probe.py``). It is a 409 naming
    ``continue``, which runs it (its pending prompt with the new one)."""
    import threading

    from server.api.app import create_app
    from server.config import Settings
    from server.task.task import Status, Task

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"))
    with TestClient(create_app(settings)) as client:
        task = Task([1, 2, 3, 4], max_tokens=5, task_id="TASK_never_ran")
        task.status = Status.READY
        client.app.state.runtime.manager.put_task("TASK_never_ran", task)
    with TestClient(create_app(settings)) as client:
        got = {}

        def stream():
            got["r"] = client.get("/v1/tasks/TASK_never_ran/stream")

        reader = threading.Thread(target=stream, daemon=True)
        reader.start()
        reader.join(20)
        assert not reader.is_alive(), "the stream of a round nothing runs stayed open"
        r = got["r"]
        assert r.status_code == 409 and "/v1/tasks/TASK_never_ran/continue" in r.text, r.text
        assert client.get("/v1/tasks/TASK_never_ran/status").json()["status"] == 1
        r = client.post("/v1/tasks/TASK_never_ran/continue",
                        json={"prompt": " hi", "max_tokens": 3, "temperature": 0})
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 30
        while not (res := client.get("/v1/tasks/TASK_never_ran/get_result").json())["finished"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert client.get("/v1/tasks/TASK_never_ran/status").json()["generated_buf"] == 3, res


def test_a_stream_opened_during_a_refused_continue_of_a_stored_round_is_a_409(tiny_model_path,
                                                                              tmp_path):
    """A stream of a row stored READY opened while a ``continue`` of it was on its way to the
    scheduler (pinned: ``check_running`` let it through) stayed open once that continue was
    refused (here a 400, the prompt over ``RWKV_MAX_PROMPT_TOKENS``): nothing ran the task
    (session 54's note). The stream waits for the continue's answer: refused, it is the 409
    a stream of that row gets without a continue."""
    import threading

    from server.api.app import create_app
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"), max_prompt_tokens=6)
    tid = _stored_unrun(settings)  # (4 tokens pending)
    with TestClient(create_app(settings)) as client:
        manager = client.app.state.runtime.manager
        refusing, streamed = threading.Event(), threading.Event()
        unpin = manager.unpin

        def slow_unpin(task_id):  # the continue, refused, gives its pin up once the stream
            if task_id == tid and not refusing.is_set():  # has seen it pinned
                refusing.set()
                streamed.wait(20)
            unpin(task_id)

        manager.unpin = slow_unpin
        _signal_pin_seen(manager, tid, streamed)
        got = {}
        post = _poster(client, got)

        cont = threading.Thread(target=post, daemon=True, args=(
            "continue", f"/v1/tasks/{tid}/continue", {"prompt": [5, 6, 7], "max_tokens": 2}))
        cont.start()
        assert refusing.wait(20)
        reader = threading.Thread(target=post, args=("stream", f"/v1/tasks/{tid}/stream"),
                                  daemon=True)
        reader.start()
        try:
            reader.join(20)
            cont.join(20)
            assert got["continue"].status_code == 400, got["continue"].text
            assert not reader.is_alive(), "the stream stayed open after the continue's refusal"
            r = got["stream"]
            assert r.status_code == 409 and f"/v1/tasks/{tid}/continue" in r.text, r.text
            assert client.get(f"/v1/tasks/{tid}/status").json()["status"] == 1
        finally:  # (a stream left open ends once the task runs)
            r = client.post(f"/v1/tasks/{tid}/continue", json={"max_tokens": 2})
            assert r.status_code == 200, r.text
            reader.join(30)


def test_a_stream_opened_during_a_slow_continue_of_a_stored_round_follows_it(tiny_model_path,
                                                                             tmp_path):
    """A stream of a row stored READY opened while a ``continue`` of it is on its way to the
    scheduler (pinned, its store thread slow to hand the task back) waits for it for as long as
    the pin lasts, not one poll: the continue runs the task, and the stream follows its round
    to the end (a 200, the round's text). A mutation that polled once (``if`` for ``while`` in
    ``check_running``) made it the 409 of a round nothing runs, and no test failed (session
    55's mutation testing)."""
    import threading

    from server.api.app import create_app
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"))
    tid = _stored_unrun(settings)
    with TestClient(create_app(settings)) as client:
        manager = client.app.state.runtime.manager
        pinned, streamed = threading.Event(), threading.Event()
        get_task = manager.get_task

        def slow_get(task_id, pin=False):  # the continue's store thread hands the pinned task
            found = get_task(task_id, pin)  # back once the stream has seen the pin, and late
            if pin and task_id == tid and not pinned.is_set():
                pinned.set()
                streamed.wait(20)
                time.sleep(0.3)  # (many of the stream's polls)
            return found

        manager.get_task = slow_get
        _signal_pin_seen(manager, tid, streamed)
        got = {}
        post = _poster(client, got)

        cont = threading.Thread(target=post, daemon=True, args=(
            "continue", f"/v1/tasks/{tid}/continue", {"max_tokens": 3, "temperature": 0}))
        cont.start()
        assert pinned.wait(20)
        reader = threading.Thread(target=post, args=("stream", f"/v1/tasks/{tid}/stream"),
                                  daemon=True)
        reader.start()
        cont.join(20)
        reader.join(30)
        assert got["continue"].status_code == 200, got["continue"].text
        assert not reader.is_alive(), "the stream of the continued round stayed open"
        r = got["stream"]
        assert r.status_code == 200 and r.text.rstrip().endswith("data: [DONE]"), r.text
        assert '"prefill_time"' in r.text and "error" not in r.text, r.text
        status = client.get(f"/v1/tasks/{tid}/status").json()
        assert status["generated_buf"] == 3, status


def _stored_unrun(settings) -> str:
    """A row stored READY before its round ran (4 prompt tokens pending), in the database of
    ``settings``; returns its id."""
    from server.api.app import create_app
    from server.task.task import Status, Task

    tid = "TASK_never_ran"
    with TestClient(create_app(settings)) as client:
        task = Task([1, 2, 3, 4], max_tokens=5, task_id=tid)
        task.status = Status.READY
        client.app.state.runtime.manager.put_task(tid, task)
    return tid


def _signal_pin_seen(manager, tid: str, seen) -> None:
    """``seen`` is set once a check finds ``tid`` pinned (a stream's ``check_running``)."""
    is_pinned = manager.is_pinned

    def watched(task_id):
        held = is_pinned(task_id)
        if held and task_id == tid:
            seen.set()
        return held

    manager.is_pinned = watched


def _poster(client, got: dict):
    """``post(key, url, body=None)``: POST ``body`` (GET without one), the reply in ``got``."""
    def post(key, url, body=None):
        got[key] = client.post(url, json=body) if body is not None else client.get(url)
    return post


def test_a_template_whose_record_fails_to_load_is_no_longer_offered(tiny_model_path, tmp_path,
                                                                    monkeypatch):
    """A template whose meta row reads but whose record does not (a damaged overflow page):
    /v1/models listed it before and after the failed load, and the 500 of a chat naming it
    had no ``x-should-retry: false`` (the openai SDK sent it three times; session 70's QA).
    Now the 500 says not to retry and /v1/models drops the template until it is deleted."""
    with _served(tiny_model_path, tmp_path) as client:
        tid, tpl = _stored_template(client)
        store = client.app.state.runtime.manager.store
        read = store.get
        monkeypatch.setattr(store, "get", _damaged(read, tpl))

        def listed() -> bool:
            return f"rwkv-7:{tpl}" in {m["id"] for m in client.get("/v1/models").json()["data"]}
        assert listed()  # (its meta row reads: the damage is not known yet)
        r = client.post("/v1/chat/completions", json={
            "model": f"rwkv-7:{tpl}", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2})
        assert r.status_code == 500 and r.headers["x-should-retry"] == "false"
        assert r.json()["error"]["code"] == "unreadable_task"
        assert not listed()
        assert client.post(f"/v1/tasks/{tpl}/delete?force=true").status_code == 200
        monkeypatch.setattr(store, "get", read)
        again = client.post(f"/v1/tasks/{tid}/as_template?name={tpl[1:]}")
        assert again.status_code == 200 and listed()  # (the id made again: offered again)
