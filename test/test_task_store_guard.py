"""The task database's guards at opening (session 31's QA): another program's file is refused
unchanged, a file of another kind gets advice about the file (not the disk), one process at a
time holds a file (a second server is refused at start), and a lock held at start is logged."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from server.task.store import TaskStore, TaskStoreError

ROOT = Path(__file__).resolve().parent.parent


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sqlite_file(path: Path, *statements: str) -> Path:
    """A database another program made: ``statements`` run in it."""
    with sqlite3.connect(path) as db:
        for sql in statements:
            db.execute(sql)
    return path


def open_in_another_process(db: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """``TaskStore(db)`` opened and closed by another Python process: its exit code and output."""
    code = ("import sys\nfrom server.task.store import TaskStore, TaskStoreError\n"
            f"try:\n    TaskStore({str(db)!r}).close()\n"
            "except TaskStoreError as e:\n    print(e)\n    sys.exit(2)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False, timeout=timeout)


def test_another_programs_database_is_refused_unchanged(tmp_path):
    """A file with tables and none named ``tasks`` (``create table foo(a)``) was taken over: it
    got this server's table and index, ``user_version`` 1 and WAL mode for good. It is refused
    now, naming the file and saying it looks like another program's database, and the file is
    left as it was (no byte, no journal mode, no lock file). An empty or a missing file is
    still made into a database."""
    other = sqlite_file(tmp_path / "other.db", "CREATE TABLE foo (a)", "INSERT INTO foo VALUES (1)")
    before, files = digest(other), sorted(os.listdir(tmp_path))
    with pytest.raises(TaskStoreError) as e:
        TaskStore(other)
    msg = str(e.value)
    assert str(other) in msg and "another program's database" in msg and "foo" in msg, msg
    assert "RWKV_TASK_DB_PATH" in msg and "Check the disk" not in msg, msg
    assert digest(other) == before and sorted(os.listdir(tmp_path)) == files
    with sqlite3.connect(other) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert db.execute("PRAGMA user_version").fetchone()[0] == 0
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["foo"]
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (empty, tmp_path / "new.db"):
        store = TaskStore(path)
        store.put("TASK_a", "{}", None)
        store.close()
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == 1
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert db.execute("SELECT task_id FROM tasks").fetchall() == [("TASK_a",)]


def test_a_file_of_another_kind_gets_advice_about_the_file(tmp_path):
    """A ``tasks`` table with other columns, or another ``user_version``: the message ended with
    "Check the disk (free space, a read-only mount) and the path's permissions", advice for a
    disk's problems, not a file's content. It says now that the file is another program's or
    another version's, and to point RWKV_TASK_DB_PATH elsewhere or move the file aside; the
    file is left unchanged (the other table's file was put in WAL mode before its check)."""
    columns = sqlite_file(tmp_path / "columns.db", "CREATE TABLE tasks (id INTEGER, name TEXT)")
    newer = sqlite_file(tmp_path / "newer.db", "CREATE TABLE tasks (a)", "PRAGMA user_version=2")
    for path, says in ((columns, "('id', 'name')"), (newer, "schema version is 2")):
        before = digest(path)
        with pytest.raises(TaskStoreError) as e:
            TaskStore(path)
        msg = str(e.value)
        assert str(path) in msg and says in msg, msg
        assert "Check the disk" not in msg and "permissions" not in msg, msg
        assert "another program's" in msg and "another version's" in msg, msg
        assert "RWKV_TASK_DB_PATH elsewhere" in msg and "move the file aside" in msg, msg
        assert digest(path) == before
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_one_process_at_a_time_holds_a_database(tmp_path):
    """Two servers on one file: nothing stopped them, their caches diverged and the last writer
    won. A store holds ``<file>.lock`` (flock) now: another process is refused, naming the
    file and the holder's pid, until the last store of this process closes; stores of one
    process share it (the SDK beside an in-process server, a test reading a manager's rows);
    ``beside_a_server`` (the state import) and ``:memory:`` take none; a process killed with
    SIGKILL leaves no stale lock."""
    db = tmp_path / "tasks.db"
    first = TaskStore(db)
    second = TaskStore(db)  # the same process: shares the hold, neither waits nor is refused
    second.put("TASK_a", "{}", None)
    assert first.contains("TASK_a")
    p = open_in_another_process(db)
    assert p.returncode == 2, p.stdout + p.stderr
    line = p.stdout.strip()
    assert "\n" not in line and str(db) in line and "RWKV_TASK_DB_PATH" in line, line
    assert f"in use by another server (pid {os.getpid()}" in line, line
    assert (tmp_path / "tasks.db.lock").read_text().strip() == str(os.getpid())
    link = tmp_path / "link.db"
    link.symlink_to(db)
    assert open_in_another_process(link).returncode == 2  # (one lock for every name of it)
    second.close()
    assert open_in_another_process(db).returncode == 2  # the first still holds it
    from server.task.store import beside_a_server

    with beside_a_server():
        TaskStore(db).close()  # (a short command beside a server)
    TaskStore(":memory:").close()
    first.close()
    p = open_in_another_process(db)
    assert p.returncode == 0, p.stdout + p.stderr
    TaskStore(db).close()  # (its lock was released at that process's close)
    # a holder killed with SIGKILL: the OS drops its lock
    code = (f"from server.task.store import TaskStore\ns = TaskStore({str(db)!r})\n"
            "print('open', flush=True)\nimport time\ntime.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(TaskStoreError, match=rf"in use by another server \(pid {holder.pid}"):
            TaskStore(db)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    TaskStore(db).close()


def test_a_second_server_on_the_database_exits_at_start(tmp_path):
    """``python run.py`` on a file another process holds: one line naming the file, the holder
    and what to do, exit code 2, before the model loads (as the other database errors)."""
    from server_harness import SERVER_ENV, free_port

    db = tmp_path / "tasks.db"
    store = TaskStore(db)
    try:
        env = {**os.environ, **SERVER_ENV, "RWKV_TASK_DB_PATH": str(db)}
        cmd = [sys.executable, "run.py", "--demo", "tiny", "--port", str(free_port())]
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                           timeout=60)
    finally:
        store.close()
    out = p.stdout + p.stderr
    assert p.returncode == 2 and "Traceback" not in out and "Loading" not in out, out[-2000:]
    assert f"in use by another server (pid {os.getpid()}" in out and str(db) in out, out[-2000:]


# run.py with its server replaced: while it "serves", another process opens the database
HOLDS = """
import subprocess, sys
import run

def serve(settings):  # the model's load and the server, as another process sees them
    p = subprocess.run([sys.executable, "-c", OPEN], capture_output=True, text=True)
    print("while serving:", p.returncode, p.stdout.strip(), flush=True)
    raise KeyboardInterrupt  # (Ctrl-C: the server stopped)

run.serve = serve
run.check_port = lambda host, port, log: None
try:
    run.main(sys.argv[1:])
except KeyboardInterrupt:
    p = subprocess.run([sys.executable, "-c", OPEN], capture_output=True, text=True)
    print("after:", p.returncode, p.stdout.strip(), flush=True)
"""


def test_run_py_holds_the_database_from_its_check_until_the_server_ends(tmp_path):
    """run.py's start-up check of the database keeps its store open, and so the file's lock,
    through the model's load (minutes) until the server is done: a second server started in
    that time is refused at its own check, before loading its model. The check closed its
    store at once, and the lock was taken again only in the lifespan, after the load (a
    review, session 32). Once the server is done the lock is released."""
    db = tmp_path / "tasks.db"
    opener = ("import sys\nfrom server.task.store import TaskStore, TaskStoreError\n"
              f"try:\n    TaskStore({str(db)!r}).close()\n"
              "except TaskStoreError as e:\n    print(e)\n    sys.exit(2)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "RWKV_TASK_DB_PATH": str(db)}
    p = subprocess.run([sys.executable, "-c", HOLDS.replace("OPEN", repr(opener)), "--demo"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    lines = [x for x in p.stdout.splitlines() if x.startswith(("while serving:", "after:"))]
    assert len(lines) == 2, p.stdout + p.stderr
    assert lines[0].startswith("while serving: 2 ") and "in use by another server" in lines[0]
    assert lines[1].strip() == "after: 0", lines


def test_the_state_import_command_runs_beside_a_server(tiny_model_path, tmp_path):
    """``python -m server.task.state_templates import`` is documented to run beside a server
    on its database (the server reads the new template at its next lookup): the server's lock
    does not refuse it."""
    from server.model.checkpoint import load_checkpoint
    from server.task.state_templates import export_state
    from server.task.task import Task

    db = tmp_path / "tasks.db"
    state = tmp_path / "zero.state"
    export_state(Task(task_id="TASK_z"), load_checkpoint(tiny_model_path)[1], state)
    server = TaskStore(db)  # (as a server holds it)
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
               "RWKV_TASK_DB_PATH": str(db), "RWKV_MODEL_PATH": tiny_model_path}
        cmd = [sys.executable, "-m", "server.task.state_templates", "import", str(state),
               "--name", "_beside"]
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                           timeout=120)
        assert p.returncode == 0 and "imported" in p.stdout, p.stdout + p.stderr
        assert server.contains("_beside")
        assert open_in_another_process(db).returncode == 2  # still held
    finally:
        server.close()


def test_a_database_locked_at_start_is_logged_soon(tmp_path):
    """Another connection holding the write lock at start: the server waited the busy timeout
    (30 s) with no word. A warning comes within a second now; the same error as before if the
    lock stays, and the store opens if it goes meanwhile."""
    from loguru import logger

    db = tmp_path / "tasks.db"
    TaskStore(db).close()
    lines: list[tuple[float, str]] = []
    sink = logger.add(lambda m: lines.append((time.monotonic(), str(m))), level="WARNING",
                      format="{message}")
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        start = time.monotonic()
        with pytest.raises(TaskStoreError, match="locked") as e:
            TaskStore(db, timeout=3)
        assert time.monotonic() - start >= 3 and "retry shortly" in str(e.value)
        assert len(lines) == 1, lines
        at, line = lines[0]
        assert at - start < 1.5, at - start
        assert str(db) in line and "locked by another connection" in line, line
        assert "waiting up to 3 s" in line, line
        lines.clear()  # released meanwhile: it opens
        threading.Timer(1.0, other.execute, ("ROLLBACK",)).start()
        store = TaskStore(db, timeout=10)
        store.put("TASK_a", "{}", None)
        store.close()
        assert len(lines) == 1 and "waiting up to 10 s" in lines[0][1], lines
    finally:
        logger.remove(sink)
        other.close()
