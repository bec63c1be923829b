"""AsyncWriter: the TaskManager's background writer thread (bounded queue, FIFO, never drops).

A write is a ``Snapshot`` taken by the caller (cheap) and encoded and stored here (the byte copy
and the SQLite write happen on this thread). ``submit`` blocks while the queue is full, so data is
never dropped; callers must not hold a lock the writer needs (the writer takes only its own locks).

Each task id with writes queued has a *ticket*; a delete retires the ticket, so writes queued
before a delete are skipped instead of resurrecting the row. A delete is two steps: ``forget``
(the ticket, under the caller's lock) and ``delete`` (the row, later); a write of the id
prepared between them belongs to a new task put under the id, so it is kept, and once it has
landed the row is that task's and stays. Writes of one id land in the order they were
prepared (one prepared earlier but queued later is skipped). A template's put writes its row on
the caller's thread (``reserve_template``, then ``write_template``): a delete between the two
voids it, so a deleted template's row never lands after the delete. Until its writes are done
the task is still reachable through ``pending_task`` (the manager serves reads from it, not from
a stale row). After each write the oldest non-template rows beyond ``max_db_size`` rows or
``max_db_bytes`` bytes are pruned.

A write the database refuses (a full disk, an I/O error, a lock held past ``BUSY_RETRY_S``) is
kept, its task with it (still served through ``pending_task``), and tried again every
``RETRY_FAILED_S`` until it lands, a newer write of the task lands, or the task is deleted;
``close`` tries once more and reports what stays unsaved (``unsaved``). Failures are logged as one
line, then once a ``LOG_EVERY_S`` while they last. Before, the task was dropped: an evicted one
was gone although its create had been answered (session 31's QA, a full disk).
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from dataclasses import dataclass

from server.logger import get_logger
from server.task.serialize import Snapshot
from server.task.store import TaskStore, is_busy_error
from server.task.task import Task

log = get_logger("task.writer")
BUSY_TRY_S = 1.0  # a write waits this long for another connection's lock (the import command,
BUSY_RETRY_S = 120.0  # a backup, a sqlite3 shell), the store free between tries, up to this
# long in all. Failed at once, a finished task evicted meanwhile was lost although the lock went
# a moment later; waiting the store's 30 s busy timeout, it held up every lookup as long
RETRY_FAILED_S = 5.0  # a refused write is tried again this often
LOG_EVERY_S = 60.0  # while writes keep failing, one line this often (not one per write)


@dataclass(eq=False)
class _Ticket:
    task: Task  # the newest object queued for this id
    pending: int = 0  # its writes not yet done
    landed: int = 0  # the seq of its newest write stored (an older one is not stored after it)


@dataclass(eq=False)
class DeleteMark:
    """A delete of an id between ``forget`` and ``delete``: ``seq`` the last write prepared
    before it; ``superseded`` once a later write of the id has landed (the row is a new task's)."""
    seq: int
    superseded: bool = False


@dataclass(eq=False)
class WriteJob:
    task_id: str
    ticket: _Ticket
    snap: Snapshot
    template: bool
    seq: int = 0  # the order of prepare (a newer write of the id supersedes a failed one)
    encoded: tuple | None = None  # (meta, blob), kept for a retry


class AsyncWriter:
    def __init__(self, store: TaskStore, queue_size: int, max_db_size: int | None = None,
                 on_lost=None, max_db_bytes: int | None = None):
        self.store = store
        self.on_lost = on_lost  # called with ids whose row is gone or was not written (or pruned)
        self.max_db_size, self.max_db_bytes = max_db_size, max_db_bytes
        self.writes = 0  # rows written (for tests and stats)
        self.failures = 0
        self._warned_small = False  # (the byte limit is below one row: said once)
        self._locked_since: float | None = None  # when writes began to find the database locked
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, queue_size))
        self._tickets: dict[str, _Ticket] = {}
        self._failed: dict[str, WriteJob] = {}  # id -> its newest refused write (under _tlock)
        self._deletes: dict[str, list[DeleteMark]] = {}  # ids forgotten, rows not yet deleted
        self._template_puts: dict[str, int] = {}  # id -> seq of its template put under way
        self._seq = 0
        self._retry_at = 0.0
        self.last_error: str | None = None  # the last refusal, while writes are unsaved
        self._logged_at = -LOG_EVERY_S
        self._tlock = threading.Lock()  # guards _tickets; never held while taking another lock
        self._db_lock = threading.Lock()  # orders "is the ticket current? write" against deletes
        self._closing = threading.Lock()  # orders ``submit``'s puts before ``close``'s end mark
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="rwkv-task-writer", daemon=True)
        self._thread.start()

    # ---- called by the manager -----------------------------------------------------------
    def prepare(self, task_id: str, task: Task, snap: Snapshot, template: bool = False) -> WriteJob:
        """Register a write (the task is reachable via ``pending_task``); ``submit`` it next."""
        with self._tlock:
            ticket = self._tickets.get(task_id)
            if ticket is None:
                ticket = self._tickets[task_id] = _Ticket(task)
            ticket.task = task
            ticket.pending += 1
            self._seq += 1
            seq = self._seq
        return WriteJob(task_id, ticket, snap, template, seq)

    def submit(self, job: WriteJob) -> None:
        """Queue a prepared write; blocks while the queue is full. After ``close`` the write is
        refused and logged: queued, it waited for a thread that had ended, and once the queue
        was full its caller (the scheduler's thread, an SDK that closed its TaskManager before
        its scheduler) blocked for ever."""
        with self._closing:  # (a write queued under it lands before close's end mark)
            if not self._closed:
                self._queue.put(job)
                return
        log.error(f"task {job.task_id} not saved: its TaskManager is closed (close the "
                  "scheduler first)")

    def pending_task(self, task_id: str) -> Task | None:
        """The task object whose write is queued but not yet done, if any."""
        with self._tlock:
            ticket = self._tickets.get(task_id)
        return None if ticket is None else ticket.task

    def template_put_under_way(self, task_id: str) -> bool:
        """Whether a put of template ``task_id`` is reserved and not yet over (its row may
        still land: a second put must not take its place)."""
        with self._tlock:
            return task_id in self._template_puts

    def reserve_template(self, task_id: str) -> int:
        """A template's put under way (the caller holds the lock that reserved the id, having
        checked ``template_put_under_way``): its ``write_template`` stores the row unless the
        id is forgotten (deleted) first."""
        with self._tlock:
            self._seq += 1
            self._template_puts[task_id] = self._seq
            return self._seq

    def write_template(self, task_id: str, snap: Snapshot, seq: int) -> bool:
        """Encode and write a template's new row on the caller's thread, durably (fails with
        ``DuplicateTaskId`` if the id is stored); False, nothing written, if the id was deleted
        since ``reserve_template`` gave ``seq``."""
        try:
            meta, blob = snap.encode()
            with self._db_lock:
                with self._tlock:
                    if self._template_puts.get(task_id) != seq:
                        return False
                self.store.insert(task_id, meta, blob, is_template=True, durable=True)
                self.writes += 1
                with self._tlock:
                    self._landed_locked(task_id, seq)
                return True
        finally:
            self.end_template_put(task_id, seq)

    def end_template_put(self, task_id: str, seq: int) -> None:
        """The put ``seq`` of template ``task_id`` is over (written, void or failed)."""
        with self._tlock:
            if self._template_puts.get(task_id) == seq:
                del self._template_puts[task_id]

    @property
    def limits(self) -> str:
        """The stored tasks kept, in words (the start-up's log and the prune's)."""
        mb = "no byte limit" if self.max_db_bytes is None else f"{self.max_db_bytes >> 20} MB"
        return f"at most {self.max_db_size} tasks and {mb}"

    @property
    def queued(self) -> list[str]:
        """Ids whose write is queued, under way or refused (kept): ``pending_task`` serves
        them."""
        with self._tlock:
            return list(self._tickets)

    @property
    def unsaved(self) -> list[str]:
        """Ids whose last write the database refused (kept, tried again)."""
        with self._tlock:
            return list(self._failed)

    def delete(self, task_id: str, mark: DeleteMark) -> bool:
        """Delete the row of ``task_id`` (``mark``: ``forget``'s return; ``release`` ends the
        delete); True if a row was deleted. The row stays if a write of the id prepared after
        the forget landed meanwhile (a new task put under the id: its row)."""
        with self._db_lock:  # (_store lands a write and marks it under this lock)
            return not mark.superseded and self.store.delete(task_id)

    def release(self, task_id: str, mark: DeleteMark) -> None:
        """The delete ``mark`` is over (the caller's lookups no longer see it under way)."""
        with self._tlock:
            marks = self._deletes.get(task_id, [])
            if mark in marks:
                marks.remove(mark)
            if not marks:
                self._deletes.pop(task_id, None)

    def forget(self, task_id: str) -> DeleteMark:
        """Skip queued writes of ``task_id`` (and forget a refused one): the first step of a
        delete, whose ``delete(task_id, mark)`` and ``release(task_id, mark)`` must follow."""
        with self._tlock:
            self._tickets.pop(task_id, None)
            self._failed.pop(task_id, None)
            self._template_puts.pop(task_id, None)
            if not self._failed:  # (its refusal is no longer one of an unsaved write)
                self.last_error = None
            mark = DeleteMark(self._seq)
            self._deletes.setdefault(task_id, []).append(mark)
        return mark

    def row_is_newer(self, task_id: str) -> bool:
        """Whether each delete of ``task_id`` under way found a newer write landed before it
        (the row is a task put after them, which they leave): False if none is under way."""
        with self._tlock:
            marks = self._deletes.get(task_id)
            return bool(marks) and all(m.superseded for m in marks)

    def flush(self) -> None:
        """Block until every write queued so far is done."""
        self._queue.join()

    def close(self) -> None:
        """Finish the queued writes, try the refused ones once more, stop the thread; what is
        still unsaved then is logged (and left in ``unsaved``)."""
        with self._closing:
            was, self._closed = self._closed, True
        if not was and self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        unsaved = self.unsaved
        if unsaved:
            log.error(f"{len(unsaved)} tasks could not be saved to {self.store.path} and are "
                      f"lost with this process: {', '.join(unsaved[:8])}"
                      f"{' ...' if len(unsaved) > 8 else ''} ({self.last_error})")

    # ---- the thread ------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            if self._queue.empty():  # caught up: a lock the next write finds is a new one, with
                self._locked_since = None  # its own BUSY_RETRY_S (not the end of an old one's)
            try:
                job = self._queue.get(timeout=RETRY_FAILED_S if self._failed else None)
            except queue.Empty:
                self._retry_failed()
                continue
            try:
                if job is None:
                    self._retry_failed(last=True)
                    return
                self._write(job)
            except _Refused as e:  # kept and tried again; its ticket stays (still served)
                job = self._keep(job, e.__cause__)
            except Exception as e:  # a failed write is logged; the writer goes on
                self.failures += 1
                log.opt(exception=e).error(f"writing task {job.task_id} failed: {e}")
                self._lost([job.task_id])
            finally:
                if job is not None:
                    self._done(job)
                self._queue.task_done()
            if self._failed and time.monotonic() >= self._retry_at:
                self._retry_failed()

    def _write(self, job: WriteJob) -> None:
        meta, blob = job.encoded = job.snap.encode()
        warned = False
        while True:
            try:
                self._store(job, meta, blob)
                self._locked_since = None
                self._settle(job)
                self._retry_at = 0.0  # the database takes writes: the refused ones now
                return
            except sqlite3.Error as e:  # (the locks are free between the tries)
                if not is_busy_error(e):
                    raise _Refused() from e  # full, read-only, I/O: the disk, not the task
                now = time.monotonic()  # (BUSY_RETRY_S counts from the first locked write
                if self._locked_since is None:  # till one succeeds or the queue is empty: a
                    self._locked_since = now   # backlog of 200 under a lock that stays does
                    # not take 200 times it)
                if now > self._locked_since + BUSY_RETRY_S:
                    raise _Refused() from e
                if not warned:
                    log.warning(f"writing task {job.task_id}: {e}; trying again for up to "
                                f"{BUSY_RETRY_S:.0f} s")
                    warned = True
                time.sleep(0.05)

    def _store(self, job: WriteJob, meta: str, blob: bytes) -> None:
        pruned, left = [], None
        with self._db_lock, self.store.waiting(BUSY_TRY_S):
            with self._tlock:
                current = self._tickets.get(job.task_id) is job.ticket
                older = job.seq < job.ticket.landed
            if not current or older:
                return  # deleted after it was queued, or a newer write of it is stored
            self.store.put(job.task_id, meta, blob, is_template=job.template,
                           durable=job.template)
            self.writes += 1
            with self._tlock:
                job.ticket.landed = job.seq
                self._landed_locked(job.task_id, job.seq)
            if self.max_db_size is not None or self.max_db_bytes is not None:
                pruned = self.store.prune(self.max_db_size, self.max_db_bytes,
                                          keep=None if job.template else job.task_id)
                left = self.store.stored_bytes  # (over the limit: the kept row alone)
        if pruned:
            log.info(f"pruned {len(pruned)} oldest tasks ({self.limits}: RWKV_TASK_DB_MAX_SIZE, "
                     "RWKV_TASK_DB_MAX_MB)")
            self._lost(pruned)
        if (left is not None and self.max_db_bytes is not None and left > self.max_db_bytes
                and not self._warned_small):
            self._warned_small = True  # (once: a limit below one row holds for every write)
            log.warning(f"a stored task's row ({left / 2**20:.1f} MB) is "
                        f"larger than RWKV_TASK_DB_MAX_MB ({self.max_db_bytes >> 20} MB): the "
                        "newest task is kept over the limit, every older one pruned; raise "
                        "the limit (0: none) to keep more than one")

    def _landed_locked(self, task_id: str, seq: int) -> None:
        """A write of ``task_id`` prepared as ``seq`` is stored: a delete under way that forgot
        the id before it leaves the row (a new task's). Caller holds ``_tlock``."""
        for mark in self._deletes.get(task_id, ()):
            mark.superseded |= mark.seq < seq

    # ---- refused writes ------------------------------------------------------------------
    def _keep(self, job: WriteJob, e: BaseException) -> WriteJob | None:
        """The database refused ``job``: keep it for a retry unless it is void (deleted, or a
        newer refused write of its id is kept). Returns the job now done with, if any."""
        self.failures += 1
        with self._tlock:
            old = self._failed.get(job.task_id)
            if self._tickets.get(job.task_id) is not job.ticket or (old and old.seq > job.seq):
                drop = job
            else:
                self._failed[job.task_id], drop = job, old
            kept = bool(self._failed)  # (none: a write deleted meanwhile, nothing unsaved)
            if kept:
                self.last_error = f"{type(e).__name__}: {e}"
        if kept:
            self._retry_at = time.monotonic() + RETRY_FAILED_S
            self._log_failing(f"writing task {job.task_id} failed")
        return drop

    def _settle(self, job: WriteJob) -> None:
        """``job`` is written (or void: deleted): a refused write of its id it supersedes is
        done with (not ``job`` itself: its caller finishes it)."""
        with self._tlock:
            old = self._failed.get(job.task_id)
            if old is not None and old.seq <= job.seq:
                del self._failed[job.task_id]
            else:
                old = None
            if not self._failed:
                self.last_error = None
        if old is not None and old is not job:
            self._done(old)

    def _retry_failed(self, last: bool = False) -> None:
        """Try the refused writes again, oldest first. One the database refuses again does not
        hold back the rest (a nearly full disk takes a short task's row, not a long one's: the
        retry stopped at the first refusal, and a write that would land was never tried, then
        lost at close); a lock held past ``BUSY_TRY_S`` ends the round (each would wait)."""
        with self._tlock:
            jobs = sorted(self._failed.values(), key=lambda j: j.seq)
        saved, refused = 0, False
        for job in jobs:
            try:
                self._store(job, *job.encoded)
            except sqlite3.Error as e:
                with self._tlock:  # (a delete's ``forget`` may have emptied it meanwhile: no
                    if self._failed:  # error left standing with nothing unsaved: /health)
                        self.last_error = f"{type(e).__name__}: {e}"
                refused = True
                if is_busy_error(e):
                    break
                continue
            except Exception as e:  # (not the database's: a retry cannot help)
                log.opt(exception=e).error(f"writing task {job.task_id} failed: {e}")
                self._lost([job.task_id])
            else:
                saved += 1
            self._settle(job)  # (out of _failed)
            self._done(job)
        if refused:
            self._retry_at = time.monotonic() + RETRY_FAILED_S
            if not last:
                self._log_failing("saving tasks still fails")
        elif jobs:
            log.info(f"the task database {self.store.path} takes writes again: {saved} "
                     "kept tasks saved")
            self._logged_at = -LOG_EVERY_S

    def _log_failing(self, what: str) -> None:
        """One line, then one a LOG_EVERY_S while writes keep failing."""
        now = time.monotonic()
        if now - self._logged_at < LOG_EVERY_S:
            return
        self._logged_at = now
        log.error(f"{what}: {self.last_error}; {len(self._failed)} tasks not yet saved to "
                  f"{self.store.path}, kept in memory and tried again every "
                  f"{RETRY_FAILED_S:g} s")

    def _lost(self, task_ids: list[str]) -> None:
        """Tell ``on_lost``; its error is logged: raised here, it ended this thread (a flush
        then waited for ever) or counted a stored row as failed."""
        if self.on_lost is None:
            return
        try:
            self.on_lost(task_ids)
        except Exception as e:
            log.opt(exception=e).error(f"on_lost({task_ids[:4]}...) failed: {e}")

    def _done(self, job: WriteJob) -> None:
        with self._tlock:
            job.ticket.pending -= 1
            if job.ticket.pending <= 0 and self._tickets.get(job.task_id) is job.ticket:
                del self._tickets[job.task_id]


class _Refused(Exception):
    """The database refused a write (its cause: the sqlite3 error); the job is kept."""
