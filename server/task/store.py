"""TaskStore: the SQLite table behind the TaskManager (one row per task: JSON + raw bytes).

Table ``tasks(task_id TEXT PRIMARY KEY, is_template INTEGER, updated_at REAL, meta TEXT,
blob BLOB)`` (``meta``/``blob`` as in ``server.task.serialize``). The database runs in WAL mode with
``synchronous=NORMAL``: every committed write survives a ``kill -9`` of the process (only a power
loss can take the last commits back); writes made with ``durable=True`` (templates) use
``synchronous=FULL`` and survive that too. A file left by a killed process opens normally (SQLite
replays or discards its WAL). One connection guarded by a lock serves all threads. A file made
here has ``auto_vacuum=INCREMENTAL``: deleted and pruned rows give their pages back (``_reclaim``).

Opening checks the file before writing anything to it: another program's database (tables, none
named ``tasks``), another ``tasks`` table or another schema version is refused unchanged. One
process at a time holds a file (``store_guard``: a lock file; hard links and a ``-wal`` without
its database refused), released by the last of its stores' ``close()``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path

from server.logger import get_logger
from server.task.store_guard import (TaskStoreError, beside_a_server,  # noqa: F401 (re-exported)
                                     check_files, claim, release)

log = get_logger("task.store")
SCHEMA_VERSION = 1
WAIT_NOTICE_S = 0.5  # a lock held at opening this long is logged, then waited for up to timeout
RECLAIM_PAGES = 1024  # free pages (4 KiB) a file may keep whatever its size
_TABLE = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id     TEXT PRIMARY KEY,
    is_template INTEGER NOT NULL DEFAULT 0,
    updated_at  REAL NOT NULL,
    meta        TEXT NOT NULL,
    blob        BLOB
)"""
_INDEX = "CREATE INDEX IF NOT EXISTS tasks_age ON tasks (is_template, updated_at)"


class DuplicateTaskId(sqlite3.IntegrityError):
    """``insert`` found a row with that id already (templates are never overwritten)."""


def bindable(task_id: str) -> bool:
    """Whether SQLite can bind ``task_id`` (UTF-8): a JSON body can carry a lone surrogate
    (``"\\ud800"``), which no stored id holds; such an id names no stored task (a read of it
    raised ``UnicodeEncodeError``: a 500 for a model ``rwkv-7:_\\ud800``, session 39's QA)."""
    try:
        task_id.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


COLUMNS = ("task_id", "is_template", "updated_at", "meta", "blob")
_ELSEWHERE = ("point RWKV_TASK_DB_PATH elsewhere, or move the file aside with its -wal and -shm "
              "files (a new database is made at its path)")


class NotOurs(sqlite3.DatabaseError):
    """A file whose content is not this server's (another program's tables, another ``tasks``
    table, another schema version): found before anything is written to it; ``hint`` says
    what to do (the disk is fine: session 31's QA)."""

    def __init__(self, problem: str, hint: str):
        super().__init__(problem)
        self.hint = hint


def is_busy_error(e: BaseException) -> bool:
    """SQLite's "database is locked" (SQLITE_BUSY/LOCKED): another connection held the lock
    past the busy timeout; the file is fine and a retry can succeed."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (5, 6)
    return isinstance(e, sqlite3.OperationalError) and "is locked" in str(e)


def is_full_error(e: BaseException) -> bool:
    """SQLite's "database or disk is full" (SQLITE_FULL): the disk has no room for the write
    (ENOSPC); the file is fine and the same write succeeds once there is. (A quota or a file
    size limit, EDQUOT or EFBIG, comes back as a disk I/O error: SQLITE_IOERR_WRITE.)"""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) == 13
    return isinstance(e, sqlite3.OperationalError) and "is full" in str(e)


def is_damage_error(e: BaseException) -> bool:
    """SQLite found the file's content damaged (SQLITE_CORRUPT, SQLITE_NOTADB: "database disk
    image is malformed") under a read: pages of it were overwritten; other rows may be fine."""
    if not isinstance(e, sqlite3.DatabaseError) or isinstance(e, NotOurs):
        return False
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (11, 26)
    return "malformed" in str(e)


def unusable(path: str, e: sqlite3.Error) -> TaskStoreError:
    """The error for a database SQLite refused; the advice fits the cause: moving a healthy
    file aside on a full or read-only disk would lose its tasks (session 27's QA)."""
    text = str(e).lower()
    if isinstance(e, NotOurs):  # its content, not the disk: the file was left unchanged
        return TaskStoreError(f"the task database {path} (RWKV_TASK_DB_PATH) cannot be used: "
                              f"{e}. {e.hint}")
    if path != ":memory:" and Path(path).is_dir():  # (SQLite says only "unable to open")
        return TaskStoreError(f"the task database {path} (RWKV_TASK_DB_PATH) is a directory; "
                              f"name a file in it (e.g. {Path(path) / 'rwkv_tasks.db'})")
    if is_busy_error(e):  # (its advice was to check the disk or move to another file)
        hint = ("Another connection holds its lock (a second server on this file, the state "
                "import command, a backup, a sqlite3 shell); retry shortly")
    elif "malformed" in text or "not a database" in text:
        hint = ("If it is damaged, restore it from a backup, or move it aside together with its "
                "-wal and -shm files, which hold its latest writes (a new, empty one is made); "
                "or point RWKV_TASK_DB_PATH elsewhere")
    else:  # full, read-only, unopenable, I/O: the disk or the path, not the file's content
        hint = ("Check the disk (free space, a read-only mount) and the path's permissions; "
                "or point RWKV_TASK_DB_PATH elsewhere")
    return TaskStoreError(f"the task database {path} (RWKV_TASK_DB_PATH) cannot be used: {e}. "
                          + hint)


def _nothing() -> None:
    pass


def _missing_folder(path: str) -> str | None:
    """The outermost folder on the way to the file ``path`` that does not exist (the store
    makes it), or None."""
    missing = None
    folder = os.path.dirname(path)
    while folder and not os.path.lexists(folder):
        missing, parent = folder, os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return missing


class TaskStore:
    """Thread-safe put/get/delete of task records in one SQLite file."""

    def __init__(self, path: str | Path, timeout: float = 30.0):
        self.path = str(path)
        new = self.path != ":memory:" and not os.path.lexists(self.path)
        made = _missing_folder(os.path.abspath(self.path)) if new else None
        if self.path != ":memory:":
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:  # (a file on the way, no permission: a traceback at start)
                raise TaskStoreError(f"the task database {self.path} (RWKV_TASK_DB_PATH) "
                                     f"cannot be made: its folder: {e}") from None
        self._lock = threading.RLock()  # (reentrant: ``listing`` reads under one hold)
        self.timeout = timeout
        self._db = None
        self._claim: str | None = None
        # the bytes of the non-template rows (meta and blob; None: not summed yet): summed once,
        # at the first ``prune`` with a byte limit (a sum reads every row: 68-82 ms at 10,000
        # rows of 20 KB, docs/experiments/session35/prune_sum.py), then kept by each write,
        # delete and prune (this connection is the file's only writer: ``_claim``)
        self._bytes: float | None = None
        # what SQLite said when it last refused a write or a delete (a full disk, a read-only
        # file; not a lock another connection held), until a write or a delete of a row
        # succeeds (one of no row proves nothing: on a full disk it succeeds while every
        # write fails): /health's "degraded" for a request's own write too, not only the
        # writer's (session 72's QA and its review)
        self.refused: str | None = None
        self._release = _nothing  # (a finalizer once the lock is held: a store never closed)
        check_files(self.path)
        try:
            self._db = sqlite3.connect(self.path, timeout=min(timeout, WAIT_NOTICE_S),
                                       check_same_thread=False,
                                       isolation_level=None)  # autocommit; explicit transactions
            try:
                self._open()
            except sqlite3.Error as e:  # another connection's lock: say so, then wait for it
                if not is_busy_error(e) or timeout <= WAIT_NOTICE_S:
                    raise
                log.warning(f"the task database {self.path} is locked by another connection "
                            f"(a backup, a sqlite3 shell, the state import); waiting up to "
                            f"{timeout:g} s")
                self._db.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
                self._open()
            self._db.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        except BaseException as e:  # (not a database, damaged, a directory, read-only, ...)
            if self._db is not None:
                self._db.close()
                self._db = None
            self._release()
            if isinstance(e, sqlite3.Error):
                raise unusable(self.path, e) from None
            raise
        where = os.path.abspath(self.path)
        if made:  # (a mistyped folder: the stored templates seemed lost; session 72's QA)
            log.warning(f"Made the folder {made} for a new task database {where} "
                        "(RWKV_TASK_DB_PATH): if one was meant to be there, check the path")
        elif new:
            log.info(f"Made a new task database {where} (RWKV_TASK_DB_PATH): none was there")

    def _open(self) -> None:
        """Check the file, hold it, then make or update its table (run again after a wait)."""
        db = self._db
        # read only, before anything is written: another program's file was given this
        # server's table, version 1 and WAL mode for good (sessions 25 and 31's QA)
        found = db.execute("PRAGMA user_version").fetchone()[0]
        if found not in (0, SCHEMA_VERSION):  # a newer server's, or another program's
            raise NotOurs(f"its schema version is {found}; this server reads version "
                          f"{SCHEMA_VERSION}", "It is another version's file (a newer "
                          "server's) or another program's: run the version that made it, or "
                          + _ELSEWHERE)
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN "
                                          "('table', 'view') AND name NOT LIKE 'sqlite~_%' "
                                          "ESCAPE '~' ORDER BY name")]
        if names and "tasks" not in names:
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            raise NotOurs(f"it has no tasks table but other tables ({shown}): it looks like "
                          "another program's database (it was left unchanged)",
                          "Point RWKV_TASK_DB_PATH at a file of this server's own (a missing "
                          "or empty file is made into one)")
        if names:
            have = tuple(r[1] for r in db.execute("PRAGMA table_info(tasks)"))
            if have != COLUMNS:  # another program's "tasks" table, or another version's
                raise NotOurs(f"its tasks table has the columns {have}, not {COLUMNS}",
                              "It is another program's file or another version's: "
                              + _ELSEWHERE)
        if self._claim is None:  # before the first write: a second server is refused here
            self._claim = claim(self.path)
            if self._claim is not None:
                self._release = weakref.finalize(self, release, self._claim)
        if not db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
            # a new file: deleted rows' pages can be given back (``_reclaim``); set before
            # its first table, the only time it can be without rewriting the file
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"PRAGMA journal_size_limit={64 << 20}")  # WAL shrinks back
        db.execute(_TABLE)
        db.execute(_INDEX)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # ---- writing -------------------------------------------------------------------------
    def put(self, task_id: str, meta: str, blob: bytes | None, is_template: bool = False,
            durable: bool = False) -> None:
        """Insert or replace the row of ``task_id``."""
        self._write("INSERT OR REPLACE", task_id, meta, blob, is_template, durable)

    def insert(self, task_id: str, meta: str, blob: bytes | None, is_template: bool = False,
               durable: bool = False) -> None:
        """Insert a new row; raises ``DuplicateTaskId`` if ``task_id`` is already stored."""
        try:
            self._write("INSERT", task_id, meta, blob, is_template, durable)
        except sqlite3.IntegrityError as e:
            raise DuplicateTaskId(f"{task_id} is already stored") from e

    def _write(self, verb: str, task_id, meta, blob, is_template, durable) -> None:
        sql = (f"{verb} INTO tasks (task_id, is_template, updated_at, meta, blob) "
               "VALUES (?, ?, ?, ?, ?)")
        with self._lock, self._noting_refusal():
            if durable:
                self._db.execute("PRAGMA synchronous=FULL")
            try:
                old = self._row_bytes(task_id)  # (a row this replaces)
                self._db.execute(sql, (task_id, int(is_template), time.time(), meta, blob))
                if self._bytes is not None:
                    self._bytes += (0 if is_template else len(meta) + len(blob or b"")) - old
                self.refused = None
            finally:
                if durable:
                    self._db.execute("PRAGMA synchronous=NORMAL")

    @contextmanager
    def _noting_refusal(self):
        """(Holding the lock) ``refused`` <- SQLite's refusal of the write or delete inside. A
        duplicate id, a lock another connection held or a damaged file (``note_damage``'s)
        are not the disk refusing writes."""
        try:
            yield
        except sqlite3.Error as e:
            if not (isinstance(e, sqlite3.IntegrityError) or is_busy_error(e)
                    or is_damage_error(e)):
                self.refused = f"{type(e).__name__}: {e}"
            raise

    @contextmanager
    def waiting(self, seconds: float):
        """Hold the connection with a busy timeout of ``seconds`` (not ``timeout``): a caller
        that tries again later (the writer) does not keep every reader waiting for it while
        another connection holds the write lock (a lookup took the whole 30 s)."""
        with self._lock:
            self._db.execute(f"PRAGMA busy_timeout={max(0, int(seconds * 1000))}")
            try:
                yield self
            finally:
                self._db.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")

    def delete(self, task_id: str) -> bool:
        """Delete a row; True if there was one."""
        if not bindable(task_id):
            return False
        with self._lock, self._noting_refusal():
            size = self._row_bytes(task_id)
            gone = self._db.execute("DELETE FROM tasks WHERE task_id=?", (task_id,)).rowcount > 0
            if gone:
                if self._bytes is not None:
                    self._bytes -= size
                self._reclaim()
                self.refused = None
            return gone

    def _row_bytes(self, task_id: str) -> int:
        """(Holding the lock) what ``task_id``'s row adds to ``_bytes``: its meta and blob when
        it is a non-template row, else 0 (none, or a template); 0 while nothing is summed."""
        if self._bytes is None:
            return 0
        row = self._db.execute("SELECT LENGTH(meta) + IFNULL(LENGTH(blob), 0) FROM tasks "
                               "WHERE task_id=? AND is_template=0", (task_id,)).fetchone()
        return 0 if row is None else row[0]

    def _reclaim(self) -> None:
        """Give free pages back to the file system once they are over a quarter of the file
        (and past RECLAIM_PAGES): a state is megabytes, and without this a file kept the size of
        its most crowded day after its rows were deleted or pruned. Only a file made with
        ``auto_vacuum=INCREMENTAL`` (every file this server made since session 26) can; for an
        older one the pragma does nothing. The file shrinks at the next checkpoint (WAL)."""
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
        if free > RECLAIM_PAGES and 4 * free > self._db.execute("PRAGMA page_count").fetchone()[0]:
            self._db.executescript("PRAGMA incremental_vacuum")  # (execute frees one page only)

    def prune(self, max_size: int | None, max_bytes: int | None = None,
              keep: str | None = None) -> list[str]:
        """Delete the oldest non-template rows beyond ``max_size`` rows, and beyond
        ``max_bytes`` bytes of them all told (their meta and blob: a state is megabytes, so a
        count alone let the default fill a disk: 10,000 rows of 21 MB at 2.9B); return their
        ids. None: no such limit. ``keep`` (the task just written; None: the newest row) is
        never pruned by ``max_bytes``, nor by ``max_size`` when given: one row over the byte
        limit alone stays, alone (``stored_bytes`` tells); pruned too, a limit below one row
        kept no task at all (session 54's note). By id, not by age: a wall clock stepped back
        dates the row just written before older ones (session 55's review)."""
        with self._lock:
            n = self._db.execute("SELECT COUNT(*) FROM tasks WHERE is_template=0").fetchone()[0]
            extra_rows = 0 if max_size is None else n - max_size
            extra_bytes = 0
            if max_bytes is not None:
                if self._bytes is None:
                    self._bytes = self._db.execute(
                        "SELECT TOTAL(LENGTH(meta)) + TOTAL(LENGTH(blob)) FROM tasks "
                        "WHERE is_template=0").fetchone()[0]
                extra_bytes = self._bytes - max_bytes
            if extra_rows <= 0 and extra_bytes <= 0:
                return []
            ids, freed = [], 0
            rows = self._db.execute("SELECT task_id, LENGTH(meta) + IFNULL(LENGTH(blob), 0) "
                                    "FROM tasks WHERE is_template=0 ORDER BY updated_at, task_id")
            for i, (task_id, size) in enumerate(rows):
                if task_id == keep:
                    continue
                if len(ids) >= extra_rows and (freed >= extra_bytes
                                               or (keep is None and i == n - 1)):
                    break
                ids.append(task_id)
                freed += size
            rows.close()
            if not ids:  # (the kept row alone over max_bytes)
                return []
            self._db.execute("BEGIN")
            try:
                self._db.executemany("DELETE FROM tasks WHERE task_id=?", [(i,) for i in ids])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            if self._bytes is not None:
                self._bytes -= freed
            self._reclaim()
            return ids

    @property
    def stored_bytes(self) -> int | None:
        """The non-template rows' bytes all told, as ``prune`` counts them (None until its first
        byte limit)."""
        with self._lock:
            return None if self._bytes is None else int(self._bytes)

    # ---- reading -------------------------------------------------------------------------
    def get(self, task_id: str) -> tuple[str, bytes | None] | None:
        """``(meta, blob)`` of ``task_id``, or None."""
        if not bindable(task_id):
            return None
        with self._lock:
            row = self._db.execute("SELECT meta, blob FROM tasks WHERE task_id=?",
                                   (task_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def get_meta(self, task_id: str) -> str | None:
        if not bindable(task_id):
            return None
        with self._lock:
            row = self._db.execute("SELECT meta FROM tasks WHERE task_id=?", (task_id,)).fetchone()
        return None if row is None else row[0]

    def contains(self, task_id: str) -> bool:
        if not bindable(task_id):
            return False
        with self._lock:
            return self._db.execute("SELECT 1 FROM tasks WHERE task_id=?",
                                    (task_id,)).fetchone() is not None

    def ids(self, limit: int | None = None, templates: bool | None = None,
            newest_first: bool = False, offset: int = 0, by_id: bool = False,
            after: str | None = None) -> list[str]:
        """Stored ids in order of last write (``by_id``: of id, an order no write changes;
        ``after``: those past that id in id order, a cursor for paging that inserts and
        deletes do not shift); ``templates`` True/False filters, None = all; ``limit`` from
        ``offset``."""
        sql, where, args = "SELECT task_id FROM tasks", [], []
        if templates is not None:
            where.append("is_template=?")
            args.append(int(templates))
        if after is not None:
            by_id = True
            where.append("task_id>?")
            args.append(after)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY task_id" if by_id else \
            f" ORDER BY updated_at {'DESC' if newest_first else 'ASC'}, task_id"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            args += [-1 if limit is None else int(limit), int(offset)]
        with self._lock:
            return [r[0] for r in self._db.execute(sql, args)]

    def present(self, ids: list[str]) -> set[str]:
        """Those of ``ids`` that are stored."""
        found, ids = set(), [i for i in ids if bindable(i)]
        with self._lock:
            for i in range(0, len(ids), 500):  # (SQLite's bound-parameter limit)
                part = ids[i:i + 500]
                sql = f"SELECT task_id FROM tasks WHERE task_id IN ({','.join('?' * len(part))})"
                found.update(r[0] for r in self._db.execute(sql, part))
        return found

    def listing(self, offset: int, limit: int, by_id: bool, among: list[str],
                after: str | None = None) -> tuple[int, list[str], set[str]]:
        """``count()``, a page of ``ids`` (newest first, or ``by_id`` / ``after``) and those of
        ``among`` that are stored, from one moment: no write lands between them."""
        with self._lock:
            return (self.count(), self.ids(limit, newest_first=True, offset=offset, by_id=by_id,
                                           after=after), self.present(among))

    def count(self, templates: bool | None = None) -> int:
        sql, args = "SELECT COUNT(*) FROM tasks", ()
        if templates is not None:
            sql, args = sql + " WHERE is_template=?", (int(templates),)
        with self._lock:
            return self._db.execute(sql, args).fetchone()[0]

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close (idempotent)."""
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as e:  # (a full disk: a traceback at start, from run.py's check)
                raise unusable(self.path, e) from None
            finally:
                self._db.close()
                self._db = None
                self._release()  # (after the connection: the file is this process's until then)
