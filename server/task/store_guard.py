"""The files behind a task database: one process per file, and files as operators leave them.

One process at a time holds a database: an exclusive ``flock`` on ``<file>.lock`` (holding its
pid), shared by the stores of that process and released by the last one's ``release`` (or by
the OS when the process ends, a ``kill -9`` too); a second server is refused at start
(``beside_a_server``: a short command, the state import, that runs beside one). ``check_files``
refuses the files SQLite would open without a word and lose writes with (a second hard link, a
``-wal`` without its database). Both raise ``TaskStoreError``, the store's error.
"""

from __future__ import annotations

import contextvars
import os
import stat
import threading
from contextlib import contextmanager

from server.logger import get_logger

try:
    import fcntl
except ImportError:  # (Windows: no guard against a second server)
    fcntl = None

log = get_logger("task.store")


class TaskStoreError(RuntimeError):
    """The database file cannot be used (not SQLite, damaged, another program's table, not
    writable); the message names the file and what to do."""


# ---- one process per file ------------------------------------------------------------------
_held: dict[str, list] = {}  # lock file (real path) -> [its fd holding the flock, stores on it]
_held_lock = threading.Lock()
_beside = contextvars.ContextVar("beside_a_server", default=False)


@contextmanager
def beside_a_server():
    """Stores opened in this block take no lock, and a server's lock does not refuse them: a
    short command that runs beside a server on its file (the state import: a new template row,
    which the server reads at its next lookup). Not for anything that keeps tasks in memory."""
    token = _beside.set(True)
    try:
        yield
    finally:
        _beside.reset(token)


def claim(db_path: str) -> str | None:
    """Hold ``<db_path>.lock`` for this process (an exclusive ``flock``, the pid written in it);
    its key for ``release``, None where there is nothing to hold (``:memory:``, no ``fcntl``,
    a folder where no lock file can be made: SQLite then says what is wrong). A second store
    of this process on the file shares the hold (counted): the SDK beside an in-process
    server, a test reading a manager's rows. ``TaskStoreError`` if another process holds it."""
    if fcntl is None or db_path == ":memory:" or _beside.get():
        return None
    key = os.path.realpath(db_path) + ".lock"  # (one lock for every link to the file)
    with _held_lock:
        if key in _held:  # (never a second fd: where flock is emulated by POSIX locks (NFS),
            _held[key][1] += 1  # closing it would drop the process's lock)
            return key
        try:
            fd = os.open(key, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            try:  # (a lock file another user made: read-only suffices for flock)
                fd = os.open(key, os.O_RDONLY)
            except OSError as e:
                return _unguarded(db_path, f"no lock file can be made beside the task database "
                                           f"({key}: {e.strerror})")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            holder = f"pid {pid}" if pid.isdigit() else f"see {key}"
            raise TaskStoreError(
                f"the task database {db_path} (RWKV_TASK_DB_PATH) is in use by another server "
                f"({holder}; or a script using the SDK on it): two on one file overwrite each "
                "other's tasks. Stop that one first, or point RWKV_TASK_DB_PATH elsewhere"
            ) from None
        except OSError as e:  # (a file system without locks: no guard)
            os.close(fd)
            return _unguarded(db_path, f"the task database's lock file {key} cannot be locked "
                                       f"({e.strerror})")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:  # (opened read-only: the message then names the lock file)
            pass
        _held[key] = [fd, 1]
        return key


def _unguarded(db_path: str, why: str) -> None:
    """``claim`` without a lock: said once in the log (nothing refuses a second server)."""
    log.warning(f"{why}: a second server on {db_path} would not be refused; run one server "
                "per file")


def check_files(path: str) -> None:
    """``TaskStoreError`` for the files at ``path`` that SQLite would open without a word and
    lose writes with (session 41's QA): a database with a second hard link (a server on the
    other name keeps another -wal and ``.lock``: neither server is refused, and each one's
    checkpoint overwrites the other's rows), and a non-empty ``-wal`` without its database (the
    file was moved away from its WAL, which holds the latest writes: a new database made here
    truncated it)."""
    if path == ":memory:" or path.startswith("file:"):
        return
    path = os.path.realpath(path)  # (SQLite keeps the -wal beside the file a link names)
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise TaskStoreError(
            f"the task database {path} (RWKV_TASK_DB_PATH) has {st.st_nlink} hard links: a "
            "server on another of its names would not be refused, and the two would overwrite "
            "each other's tasks. Keep one name (copy the file instead of linking it)")
    wal = path + "-wal"
    try:
        wal_size = os.path.getsize(wal)
    except OSError:
        return
    if wal_size and (st is None or st.st_size == 0):
        raise TaskStoreError(
            f"the task database {path} (RWKV_TASK_DB_PATH) is missing or empty, but {wal} "
            f"({wal_size:,} bytes) is there: the latest writes of a database moved or deleted "
            "from this path. Move that database back (its -wal holds its last tasks), or move "
            f"{wal} and {path}-shm aside too to start a new one")


def release(key: str | None) -> None:
    """One store of this process is done with the file; the last one's release unlocks it."""
    if key is None:
        return
    with _held_lock:
        hold = _held.get(key)
        if hold is None:
            return
        hold[1] -= 1
        if hold[1] <= 0:
            del _held[key]
            os.close(hold[0])  # (the flock goes with the file's last descriptor)
