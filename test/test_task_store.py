"""Task records (JSON + raw tensor bytes, no pickle) and the SQLite TaskStore."""

import json
import re
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from task_fakes import make_task, same_bits, same_task

from server.task.serialize import RecordError, TaskBusy, decode_task, encode_task
from server.task.store import DuplicateTaskId, TaskStore
from server.task.task import Status, Task

ROOT = Path(__file__).resolve().parent.parent
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("state_dtype", DTYPES)
def test_round_trip_is_bit_exact(dtype, state_dtype):
    t = make_task(3, "TASK_abc", dtype=dtype, state_dtype=state_dtype)
    t.state.shift.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -0.0, 1e-30])
    t.pending = [9, 8]
    meta, blob = encode_task(t)
    assert json.loads(meta)["task_id"] == "TASK_abc"  # metadata is plain JSON
    u = decode_task(meta, blob)
    assert same_task(t, u)
    assert u.state.shift.dtype == dtype and u.state.wkv.dtype == state_dtype
    assert u.state.wkv.shape == (2, 1, 2, 4, 4) and u.state.batch_size == 1
    raw = [x.state.shift.view(torch.uint8).numpy().tobytes() for x in (t, u)]
    assert raw[0] == raw[1]
    assert u.is_finished and u.wait(0)  # a stored finished task reads as finished
    u.state.wkv.add_(1)  # decoded tensors are writable and own their memory
    assert not same_bits(u.state.wkv, t.state.wkv)


def test_zero_state_and_statuses_round_trip():
    for status in (Status.PREFILL, Status.READY, Status.FINISHED):
        t = Task([5, 6, 7], task_id="TASK_z", seed=None)
        t.status = status
        u = decode_task(*encode_task(t))
        assert u.state is None and u.penalties is None
        assert u.status == status and u.pending == [5, 6, 7] and u.seed == t.seed
        assert u.is_finished == (status == Status.FINISHED)


def test_a_record_names_the_byte_order_it_was_written_in(monkeypatch):
    """The blob holds the tensors' bytes as they lie in memory, but every record said
    "little": on a big-endian machine (s390x) each task the server stored was refused by that
    same server ("record is little-endian, this machine is big"). A record names the machine's
    order now, and one of the other order is still refused."""
    import sys

    t = make_task(1)
    monkeypatch.setattr(sys, "byteorder", "big")
    meta, blob = encode_task(t)
    assert json.loads(meta)["byteorder"] == "big"
    assert same_task(decode_task(meta, blob), t)  # read back where it was written
    monkeypatch.setattr(sys, "byteorder", "little")
    with pytest.raises(RecordError, match="big-endian"):
        decode_task(meta, blob)


def test_stored_id_is_the_row_key():
    u = decode_task(*encode_task(make_task(1, "TASK_a")), task_id="_tpl")
    assert u.task_id == "_tpl" and u.is_template


def test_running_task_is_refused():
    t = make_task(1, status=Status.RUNNING)
    with pytest.raises(TaskBusy):
        encode_task(t)


def test_malformed_records_are_rejected():
    meta, blob = encode_task(make_task(2))
    m = json.loads(meta)
    with pytest.raises(RecordError):
        decode_task(dict(m, version=99), blob)
    bad = json.loads(meta)
    bad["tensors"][0]["dtype"] = "object"
    with pytest.raises(RecordError):
        decode_task(bad, blob)
    with pytest.raises(RecordError):
        decode_task(m, blob[:-8])  # truncated blob
    bad = json.loads(meta)
    bad["tensors"] = [e for e in bad["tensors"] if e["name"] != "wkv"]
    with pytest.raises(RecordError):
        decode_task(bad, blob)


def test_store_put_get_delete_and_listing(tmp_path):
    s = TaskStore(tmp_path / "t.db")
    assert s._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.put("TASK_1", '{"a":1}', b"\x00\x01")
    s.put("_tpl", '{"b":2}', None, is_template=True, durable=True)
    s.put("TASK_1", '{"a":3}', b"\x02")  # replace
    assert s.get("TASK_1") == ('{"a":3}', b"\x02") and s.get("nope") is None
    assert s.get_meta("_tpl") == '{"b":2}' and s.contains("_tpl")
    assert s.count() == 2 and s.count(templates=True) == 1 and s.ids(templates=False) == ["TASK_1"]
    assert s.ids(newest_first=True) == ["TASK_1", "_tpl"]
    with pytest.raises(DuplicateTaskId):
        s.insert("_tpl", "{}", None, is_template=True)
    assert s.get_meta("_tpl") == '{"b":2}'
    assert s.delete("TASK_1") and not s.delete("TASK_1")
    s.close()
    s2 = TaskStore(tmp_path / "t.db")  # reopen
    assert s2.ids() == ["_tpl"]
    s2.close()


def test_prune_drops_oldest_non_templates(tmp_path):
    s = TaskStore(tmp_path / "p.db")
    s.put("_a", "{}", None, is_template=True)
    for i in range(6):
        s.put(f"TASK_{i}", "{}", None)
    s.put("_b", "{}", None, is_template=True)
    assert s.prune(10) == []
    assert s.prune(2) == ["TASK_0", "TASK_1", "TASK_2", "TASK_3"]
    assert sorted(s.ids()) == ["TASK_4", "TASK_5", "_a", "_b"]
    assert s.prune(0) == ["TASK_4", "TASK_5"] and sorted(s.ids()) == ["_a", "_b"]


def test_prune_keeps_the_rows_bytes_within_a_limit(tmp_path):
    """``max_bytes``: the oldest non-template rows go until the rest (meta and blob) fit; a
    count alone let the default 10,000 rows of 21 MB states (2.9B) fill a disk."""
    s = TaskStore(tmp_path / "b.db")
    sums = []  # the sum over every row: once, then kept by writes, deletes and prunes
    s._db.set_trace_callback(lambda sql: sums.append(sql) if "TOTAL(" in sql else None)
    s.put("_t", "{}", bytes(5000), is_template=True)  # templates: not counted, never pruned
    for i in range(5):
        s.put(f"TASK_{i}", "{}", bytes(1000))  # 1,002 bytes a row
    assert s.prune(None, 5010) == [] and s.prune(10, 5010) == []
    assert s.prune(None, 3500) == ["TASK_0", "TASK_1"]  # 3,006 bytes left
    for i in range(5, 8):  # written after the sum: counted on top of it
        s.put(f"TASK_{i}", "{}", bytes(1000))
    assert s.prune(None, 3006) == ["TASK_2", "TASK_3", "TASK_4"]
    s.put("TASK_5", "{}", bytes(3000))  # replaced (now the newest): 5,006 bytes
    assert s.prune(None, 5006) == [] and s.prune(2, 5006) == ["TASK_6"]
    assert s.prune(None, 3003) == ["TASK_7"]  # whole rows, oldest first
    assert sorted(s.ids()) == ["TASK_5", "_t"]
    s.put("TASK_8", "{}", bytes(1000))
    assert s.delete("TASK_5") and s.prune(None, 1002) == []
    # the newest row stays over a limit below it (pruned, no task was kept: session 54's note)
    assert s.prune(None, 1001) == [] and s.stored_bytes == 1002
    s.put("TASK_9", "{}", bytes(1000))
    assert s.prune(None, 1001) == ["TASK_8"] and s.ids(templates=False) == ["TASK_9"]
    assert s.prune(0, 1001) == ["TASK_9"]  # (a count of 0 keeps none, as before)
    assert len(sums) == 1, sums
    s.close()


def test_deleted_and_pruned_rows_give_their_space_back(tmp_path):
    """Rows deleted or pruned give their pages back to the file system once the free pages
    pass a quarter of the file: the file kept its largest size before (a QA report, session 26:
    68 MB after every row was deleted). A file made without ``auto_vacuum`` (an older server's)
    opens and deletes as before, keeping its size."""
    import os

    path = tmp_path / "t.db"
    store = TaskStore(path)
    blob = os.urandom(400_000)  # a small model's state
    for i in range(40):
        store.put(f"TASK_{i:02d}", "{}", blob)
    store.close()
    full = os.path.getsize(path)
    store = TaskStore(path)
    assert store._db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
    for i in range(20):
        store.delete(f"TASK_{i:02d}")
    assert store.prune(5) == [f"TASK_{i:02d}" for i in range(20, 35)]
    store.close()
    assert os.path.getsize(path) < full // 4, (os.path.getsize(path), full)
    store = TaskStore(path)
    assert store.ids() and all(store.get(f"TASK_{i}")[1] == blob for i in range(35, 40))
    store.close()

    old = tmp_path / "old.db"  # an older server's file: no auto_vacuum
    with sqlite3.connect(old) as db:
        db.execute("CREATE TABLE tasks (task_id TEXT PRIMARY KEY, is_template INTEGER NOT NULL "
                   "DEFAULT 0, updated_at REAL NOT NULL, meta TEXT NOT NULL, blob BLOB)")
    store = TaskStore(old)
    assert store._db.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    for i in range(10):
        store.put(f"TASK_{i}", "{}", blob)
    assert store.delete("TASK_0") and store.prune(2) and store.count() == 2
    store.close()


def test_store_is_thread_safe(tmp_path):
    s = TaskStore(tmp_path / "c.db")
    errors = []

    def work(k):
        try:
            for i in range(30):
                s.put(f"TASK_{k}_{i}", json.dumps({"k": k}), bytes([k]) * 100)
                assert s.get(f"TASK_{k}_{i}")[1] == bytes([k]) * 100
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and s.count() == 120
    assert s._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_no_pickle_in_stored_data_paths():
    """Stored data is never unpickled: the task package does not mention pickle or torch.load/
    save at all, and nowhere in server/ is pickle used to load (checkpoints go through
    torch.load(weights_only=True), which refuses arbitrary objects)."""
    for path in (ROOT / "server" / "task").rglob("*.py"):
        if path.name == "state_file.py":  # reads uploaded .pth files: torch.load(weights_only=True)
            continue  # (checked with every other module by test_security.py's AST scan)
        text = path.read_text()
        assert not re.search(r"pickle|torch\.(load|save)|marshal|shelve", text), path
    for path in (ROOT / "server").rglob("*.py"):
        text = path.read_text()
        bad = r"pickle\.(loads?|Unpickler)\b|cloudpickle|\bdill\b|shelve"
        assert not re.search(bad, text), path
        for call in re.finditer(r"torch\.load\((.*)", text):  # the rest of the call's line
            assert "weights_only=True" in call.group(1), (path, call.group(0))


def test_sqlite_rows_hold_json_and_bytes(tmp_path):
    s = TaskStore(tmp_path / "r.db")
    meta, blob = encode_task(make_task(4, dtype=torch.bfloat16))
    s.put("TASK_r", meta, blob)
    s.close()
    db = sqlite3.connect(tmp_path / "r.db")
    kinds = db.execute("SELECT typeof(meta), typeof(blob) FROM tasks").fetchone()
    assert kinds == ("text", "blob")
    row_meta, row_blob = db.execute("SELECT meta, blob FROM tasks").fetchone()
    assert same_task(decode_task(row_meta, row_blob), make_task(4, dtype=torch.bfloat16))


def test_a_database_that_cannot_be_used_is_named(tmp_path):
    """Not SQLite, another program's ``tasks`` table, a directory: ``TaskStoreError`` naming the
    file, the variable and what to do (sqlite3's bare errors reached the start-up as a
    traceback; session 22). ``run.py`` checks it before the model loads (test_api_errors.py)."""
    from server.task.store import TaskStoreError

    text = tmp_path / "text.db"
    text.write_text("not a database\n" * 200)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE tasks (id INTEGER, name TEXT)")
    # a version this server does not read (a newer one's, another program's): it was given
    # this server's table and version 1 (session 25's QA); left as it was
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as db:
        db.execute("CREATE TABLE foo (a)")
        db.execute("PRAGMA user_version=7")
    for path, says in ((text, "file is not a database"), (other, "('id', 'name')"),
                       (tmp_path, "is a directory; name a file in it"),
                       (newer, "schema version is 7")):
        with pytest.raises(TaskStoreError) as e:
            TaskStore(path)
        msg = str(e.value)
        assert str(path) in msg and "RWKV_TASK_DB_PATH" in msg and says in msg, msg
        # moving the file aside is advice for a damaged file only: on a full or read-only
        # disk it would lose a healthy database's tasks (session 27's QA)
        assert ("move it aside" in msg) == (path == text), msg
    with sqlite3.connect(newer) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 7
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["foo"]
    TaskStore(tmp_path / "new.db").close()  # a missing file is made


def test_a_database_failing_under_a_request_is_a_500_naming_it(tiny_model_path, tmp_path,
                                                                monkeypatch):
    """A file damaged while serving (reads raise ``sqlite3.DatabaseError``): the Task API answers
    500 with a message naming the database and what to do, not "Internal server error:
    DatabaseError" (session 22's QA: a file with corrupt interior pages passed the start)."""
    import httpx
    from openai_helpers import LiveServer

    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "tasks.db"), verbose=False)
    with LiveServer(settings) as srv:
        store = srv.runtime.manager.store

        def damaged(*a, **k):
            raise sqlite3.DatabaseError("database disk image is malformed")

        monkeypatch.setattr(store, "get", damaged)
        monkeypatch.setattr(store, "get_meta", damaged)
        monkeypatch.setattr(store, "contains", damaged)
        r = httpx.get(f"{srv.url}/v1/tasks/TASK_{'0' * 32}/get_result", timeout=30)
        assert r.status_code == 500, r.text
        detail = r.json()["detail"]
        assert store.path in detail and "malformed" in detail and "RWKV_TASK_DB_PATH" in detail


def test_a_locked_database_under_a_request_is_a_503_to_retry(tiny_model_path, tmp_path):
    """Another connection holding the write lock past the busy timeout (a backup, the import
    command, a sqlite3 shell): ``as_template`` was a 500 advising to check the disk or point
    RWKV_TASK_DB_PATH elsewhere (live: after 30 s). Now a 503 with Retry-After saying so; the
    same request succeeds once the lock is gone."""
    import httpx
    from openai_helpers import LiveServer

    from server.config import Settings

    db = str(tmp_path / "tasks.db")
    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=db, verbose=False)
    with LiveServer(settings) as srv:
        url = f"{srv.url}/v1/tasks"
        tid = httpx.post(f"{url}/create", json={"prompt": "Hi", "max_tokens": 0},
                         timeout=60).json()["task_id"]
        srv.runtime.manager.flush()
        srv.runtime.manager.store._db.execute("PRAGMA busy_timeout=200")
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        r = httpx.post(f"{url}/{tid}/as_template", timeout=30)
        other.execute("ROLLBACK")
        other.close()
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        detail = r.json()["detail"]
        assert db in detail and "locked" in detail and "retry" in detail
        assert "Check the disk" not in detail
        assert httpx.post(f"{url}/{tid}/as_template", timeout=30).status_code == 200


def test_zero_penalties_are_not_stored(tmp_path):
    """A record holds its penalties only when some are not zero (as serialize.py says): every
    row carried a [V] float32 tensor of zeros, 256 KB of a tiny model's 330 KB (session 41's
    QA). Read back, such a task has none (the engine loads zeros then), other penalties are
    kept bit for bit."""
    import torch

    from server.task.serialize import decode_task, encode_task
    from server.task.task import Task

    task = Task(task_id="TASK_z", prompt=[1, 2, 3])
    task.penalties = torch.zeros(65536)
    meta, blob = encode_task(task)
    assert "penalties" not in meta and len(blob) == 0
    assert decode_task(meta, blob).penalties is None
    task.penalties[7] = 2.5
    meta, blob = encode_task(task)
    back = decode_task(meta, blob).penalties
    assert back is not None and torch.equal(back, task.penalties)


def test_a_tasks_turn_stop_is_stored():
    """``stop_at_turn`` (False for fill-in-the-middle) survives the record, and a record written
    before it existed reads as True."""
    import json

    from server.task.serialize import decode_task, encode_task
    from server.task.task import Task

    task = Task(task_id="TASK_f", prompt=[1, 2, 3])
    task.stop_at_turn = False
    meta, blob = encode_task(task)
    assert decode_task(meta, blob).stop_at_turn is False
    old = json.loads(meta)
    del old["stop_at_turn"]
    assert decode_task(old, blob).stop_at_turn is True


def test_a_record_without_min_p_reads_as_min_p_off():
    """Records written before ``min_p`` existed (no such key in their parameters) read back
    with it off; a stored one comes back as stored."""
    t = make_task(1, "TASK_old")
    meta, blob = encode_task(t)
    assert json.loads(meta)["params"]["min_p"] == t.min_p != 0
    old = json.loads(meta)
    del old["params"]["min_p"]
    assert decode_task(json.dumps(old), blob).min_p == 0.0
    assert decode_task(meta, blob).min_p == t.min_p


def test_prune_keeps_the_row_just_written_whatever_the_clock_says(tmp_path, monkeypatch):
    """Pruning goes oldest first by ``updated_at`` (wall-clock time), and took the newest row
    for the one just written: after the clock stepped back an hour (an NTP correction) a byte
    limit below one row pruned the task just written and kept an older one (session 55's
    review). The writer names the row it wrote (``keep``); without it the newest is kept."""
    import server.task.store as store_mod

    s = TaskStore(tmp_path / "c.db")
    real = store_mod.time.time
    s.put("TASK_a", "{}", bytes(1000))
    monkeypatch.setattr(store_mod.time, "time", lambda: real() - 3600)
    s.put("TASK_b", "{}", bytes(1000))  # written last, dated first
    assert s.prune(None, 1001, keep="TASK_b") == ["TASK_a"]
    assert s.ids(templates=False) == ["TASK_b"] and s.stored_bytes == 1002
    s.put("TASK_c", "{}", bytes(1000))  # the same clock: dated after TASK_b
    assert s.prune(1, None, keep="TASK_b") == ["TASK_c"]  # the count limit spares it too
    s.put("TASK_d", "{}", bytes(1000))
    assert s.prune(None, 1001) == ["TASK_b"]  # no keep: the newest by its date stays
    assert s.ids(templates=False) == ["TASK_d"]


@contextmanager
def _failing(store: TaskStore, verb: str, error: sqlite3.Error):
    """``store``'s connection raising ``error`` at each statement that starts with ``verb``
    (a full disk, a damaged page), the others run as usual."""
    real = store._db

    class Failing:
        def execute(self, sql, *a):
            if sql.startswith(verb):
                raise error
            return real.execute(sql, *a)

    store._db = Failing()
    try:
        yield
    finally:
        store._db = real


def test_a_duplicate_id_or_a_busy_lock_is_no_refusal(tmp_path):
    """``TaskStore.refused`` (/health's "degraded") notes the disk refusing writes, not a
    duplicate id (the 409 of a name taken) nor a lock another connection held past the busy
    timeout: either was a false alarm (session 72's mutation review); nor a damaged file,
    which /health shows as ``damaged`` (``note_damage``)."""
    s = TaskStore(tmp_path / "t.db", timeout=0.2)
    s.put("TASK_a", "{}", b"x")
    with pytest.raises(DuplicateTaskId):
        s.insert("TASK_a", "{}", b"x")
    assert s.refused is None
    other = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError):
            s.put("TASK_b", "{}", b"y")
        assert s.refused is None
    finally:
        other.execute("ROLLBACK")
        other.close()
    # (a damaged page under the write: ``note_damage``'s, shown apart)
    with _failing(s, "INSERT", sqlite3.DatabaseError("database disk image is malformed")), \
            pytest.raises(sqlite3.DatabaseError):
        s.put("TASK_c", "{}", b"z")
    assert s.refused is None
    s.close()


def test_a_delete_of_a_row_clears_a_refusal_and_a_refused_delete_is_noted(tmp_path):
    """Deleting a row (an operator freeing room) clears the refusal; a delete the disk refuses
    (on a full disk the WAL cannot grow) is one (session 72's mutation review)."""
    s = TaskStore(tmp_path / "t.db")
    s.put("TASK_a", "{}", b"x")
    s.refused = "OperationalError: database or disk is full"
    assert s.delete("TASK_a") and s.refused is None
    s.put("TASK_b", "{}", b"x")
    with _failing(s, "DELETE", sqlite3.OperationalError("database or disk is full")), \
            pytest.raises(sqlite3.OperationalError):
        s.delete("TASK_b")
    assert s.refused and "disk is full" in s.refused
    s.close()
