"""TaskManager: an LRU cache of tasks in CPU memory in front of the SQLite TaskStore.

Ids decide the policy:
  * ``_…``   templates: read-only. Written synchronously (``synchronous=FULL``) at ``put_task``
             and never overwritten (putting an existing template id raises ``TemplateExists``), never
             evicted, never pruned; deleting one needs ``force``. Templates in memory are pinned
             and *not* counted against the cache capacity. A template put while its scheduler
             still runs it is written when it finishes.
  * ``TMP_…`` (and ``TMP``) temporary: cached only; never written (an evicted one is gone).
  * others (``TASK_…``) persistent: written by the background writer when they finish (so a
             ``kill -9`` loses none that finished a moment before), when evicted, closed or
             flushed; unchanged tasks are not written again.

A task the scheduler holds (running, or queued/admitted and not finished) is "busy": it is never
evicted (the cache may exceed its capacity meanwhile), never written (its CPU state lags its
tokens), and ``close_task`` defers to its finish. A task on its way to the scheduler is *pinned*
(``put_task``/``get_task`` with ``pin=True``, then ``unpin`` once ``add_task`` holds it or the
request gave up): not evicted either. Without it, a request's own put could evict the task it
was about to submit when everything older was busy (more tasks in flight than the capacity), and
its result was never written (a review, session 14). ``get_task`` serves the newest copy: cache,
then a write still queued, then the database; a task deleted while it was being read from the
database is not served (nor cached again).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import weakref
from collections import OrderedDict

from server.logger import get_logger
from server.model.state import State
from server.task.policy import (TaskNotFound, TaskUnreadable, TemplateExists, TemplateProtected,
                                TooManyTemplates, check_id, is_busy, is_template_id,
                                is_temporary_id, loaded_digest, model_mismatch, same_content,
                                signature, stored_mismatch)
from server.task.serialize import (DTYPES, RecordError, TaskBusy, decode_task, decode_tensors,
                                   snapshot)
from server.task.state_file import range_problem, wider
from server.task.store import DuplicateTaskId, TaskStore, TaskStoreError, is_damage_error
from server.task.task import Status, Task, new_task_id
from server.task.writer import AsyncWriter, WriteJob

log = get_logger("task.manager")
__all__ = ["TaskManager", "TaskNotFound", "TemplateProtected", "TemplateExists", "TaskBusy",
           "TooManyTemplates", "get_task_manager", "is_busy", "is_template_id", "is_temporary_id"]


class TaskManager:
    def __init__(self, db_path: str | None = None, capacity: int | None = None,
                 max_db_size: int | None = None, queue_size: int | None = None, loader=None,
                 max_db_mb: int | None = None):
        from server.config import settings

        self.capacity = capacity or settings.task_default_cpu_capacity
        self.max_db_size = max_db_size or settings.task_db_max_size
        mb = settings.task_db_max_mb if max_db_mb is None else max_db_mb  # (0: no limit)
        self.store = TaskStore(db_path or settings.task_db_path)
        self.writer = AsyncWriter(self.store, queue_size or settings.task_async_queue_size,
                                  self.max_db_size, on_lost=self._forget_clean,
                                  max_db_bytes=mb << 20 if mb else None)
        self.loader, self.sampler = loader, None
        self._lock = threading.RLock()
        self._cache: OrderedDict[str, Task] = OrderedDict()  # non-templates, least recent first
        self._templates: dict[str, Task] = {}  # pinned, not counted
        self._unsaved: set[str] = set()  # templates put while busy: written when they finish
        self._closing: dict[str, Task] = {}  # closed while busy: written when they finish
        # evicted tasks an application still holds: the newest copy while they live (get_task
        # returns the object, and a later round of it is written when it finishes)
        self._evicted: weakref.WeakValueDictionary[str, Task] = weakref.WeakValueDictionary()
        self._evicted_clean: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # their
        # ``_clean`` signatures (revived, an unchanged one is not written again)
        self._clean: dict[str, tuple] = {}  # id -> signature of the content last queued/written
        self._pins: dict[str, int] = {}  # id -> pins (tasks on their way to the scheduler)
        self._deleted: OrderedDict[str, int] = OrderedDict()  # id -> its deletion's number, the
        # most recent DELETED_SEEN (a read from the database compares them with its start)
        self._last_delete = 0  # deletions so far (the number of the last one)
        self._forgotten = 0  # the largest deletion number dropped from _deleted
        self._deleting: dict[str, int] = {}  # id -> deletes whose row is not yet gone (a read
        # of the row meanwhile is stale: ``get_task`` serves it as deleted)
        self._hooks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._closed = False
        self._template_fit: dict[str, tuple] = {}  # template id -> (model config, it fits)
        self._unreadable: set[str] = set()  # templates whose stored record failed to load
        self._damage: str | None = None  # SQLite's first "malformed" under a read (/health)

    @property
    def model_digest(self) -> str | None:
        """The loaded weights' digest (``checkpoint.weights_digest``): a stored state of other
        weights does not fit (``policy.other_weights``); None without a loader."""
        return loaded_digest(self.loader)

    def set_dependencies(self, loader, sampler=None) -> None:
        """Attach the model bundle: tasks loaded from the database decode with ``loader.decode``
        and are checked against its model. ``sampler`` is kept for the seed's signature
        (``set_dependencies(loader, scheduler.sampler)``); nothing here samples."""
        self.loader, self.sampler = loader, sampler
        with self._lock:
            self._template_fit.clear()  # (read against the model before, or none)
            for t in [*self._cache.values(), *self._templates.values()]:
                if t.tokenizer is None:
                    t.tokenizer = loader

    # ---- the seed's API ---------------------------------------------------------------
    def put_task(self, task_id: str, task: Task, pin: bool = False,
                 max_templates: int = 0) -> str:
        """Store ``task`` under ``task_id`` (sets ``task.task_id``). Templates: see module doc.
        ``pin``: not evicted until ``unpin`` (a task about to be submitted). ``max_templates``
        (a template; 0 = no limit): raise ``TooManyTemplates`` when that many are stored.
        ``TypeError`` for a ``task`` that is no Task, ``ValueError`` for an unusable id
        (``policy.TASK_ID``)."""
        if not isinstance(task, Task):
            raise TypeError(f"put_task stores a Task, not {type(task).__name__}")
        check_id(task_id)
        if task.tokenizer is None and self.loader is not None:
            task.tokenizer = self.loader
        if is_template_id(task_id):
            return self._put_template(task_id, task, max_templates)
        task.task_id = task_id
        with self._lock:
            if pin:
                self._pin_locked(task_id)
            self._cache[task_id] = task
            self._cache.move_to_end(task_id)
            self._closing.pop(task_id, None)  # a closed older object under this id is superseded
            self._evicted.pop(task_id, None)  # (and an evicted one)
            self._clean.pop(task_id, None)
            jobs = self._evict_locked()
        self.track(task)
        if task.status == Status.FINISHED:  # it may have finished before it was tracked
            self._on_finished(task)
        self._submit(jobs)
        return task_id

    def held_template(self, task_id: str) -> Task | None:
        """The template ``task_id`` if it is in memory (templates stay there once read), else
        None: never reads the database, so an event loop may call it (``get_task`` otherwise)."""
        with self._lock:
            return self._templates.get(task_id)

    def get_task(self, task_id: str, pin: bool = False) -> Task | None:
        """The task from memory, else from the database (then cached); None if unknown.
        ``pin``: as ``put_task``'s, when the task is found."""
        task, jobs = self._get_cached(task_id, pin)
        if task is not None or is_temporary_id(task_id):
            self._submit(jobs)
            return task
        with self._lock:  # (a delete under way now: it has counted itself already)
            start, deleting = self._last_delete, self._stale_row_locked(task_id)
        try:
            rec = self._read_row(self.store.get, task_id)
            if rec is None:
                return None
            loaded = _decode(rec[0], rec[1], task_id, tokenizer=self.loader)
        except TaskUnreadable:  # (a template /v1/models listed from its readable meta row
            # kept being listed after its record failed to load; session 70's QA)
            if is_template_id(task_id):
                with self._lock:
                    self._unreadable.add(task_id)
            raise
        model = getattr(self.loader, "model", None)
        if loaded.state is not None and model is not None:  # (stored while the server ran
            # wider dtypes: only the import checked the range, and such a template was served
            # as empty text with a 200; session 41's QA)
            loaded.state_unfit = range_problem(loaded.state, model.dtype, model.state_dtype)
        with self._lock:
            task, jobs = self._get_cached(task_id, pin)
            if task is None:  # nobody loaded or put it meanwhile
                deleted = deleting or self._stale_row_locked(task_id) or \
                    self._deleted_since(task_id, start)
                if deleted:
                    return None  # deleted while its row was read: gone (not cached again)
                if deleted is None:
                    return loaded  # unknown: served as read, not cached
                task = loaded
                self._clean[task_id] = signature(task)  # identical to its row
                if is_template_id(task_id):
                    self._templates[task_id] = task
                else:
                    if pin:
                        self._pin_locked(task_id)
                    self._cache[task_id] = task
                    jobs = self._evict_locked()
        self.track(task)
        self._submit(jobs)
        return task

    def is_pinned(self, task_id: str) -> bool:
        """Whether a request holds ``task_id`` on its way to the scheduler (``pin=True``)."""
        with self._lock:
            return task_id in self._pins

    def unpin(self, task_id: str) -> None:
        """Undo one ``pin=True`` of ``put_task``/``get_task`` (the task is busy now, or the
        request gave it up)."""
        with self._lock:
            n = self._pins.pop(task_id, 0) - 1
            if n > 0:
                self._pins[task_id] = n
            jobs = self._evict_locked()
        self._submit(jobs)

    def fork_template(self, template_id: str, new_id: str | None = None, tmp: bool = False) -> str:
        """Put a copy of ``template_id`` (any stored task at rest) under a new id; return it.
        ``ValueError`` for an unusable ``new_id`` (``put_task``'s check, before any reading)."""
        if new_id is not None:
            check_id(new_id)
        src = self.get_task(template_id)
        if src is None:
            raise TaskNotFound(f"task {template_id} not found")
        if is_busy(src):
            raise TaskBusy(f"task {template_id} is running; fork it when it has finished")
        new_id = new_id or new_task_id("TMP" if tmp else "TASK")
        child = src.fork(new_id)
        if child.tokenizer is None and self.loader is not None:
            child.tokenizer = self.loader
        self.put_task(new_id, child)
        return new_id

    def close_task(self, task_id: str) -> bool:
        """Write the task (persistent ids) and drop it from memory; False if it was not there.
        (The seed's SDK call; the server itself never closes a task this way.)"""
        job = None
        with self._lock:
            if is_template_id(task_id):  # stored already (unless unsaved: keep it until it is)
                if task_id in self._unsaved:
                    return False
                return self._templates.pop(task_id, None) is not None
            task = self._cache.pop(task_id, None)
            if task is None:
                return False
            if not is_temporary_id(task_id):
                if is_busy(task):
                    self._closing[task_id] = task
                else:
                    job = self._job_locked(task_id, task)
            self._clean.pop(task_id, None)
        self._submit([job] if job else [])
        return True

    def delete_task_from_any_level(self, task_id: str, force: bool = False) -> Task | None:
        """Delete from memory, the write queue and the database; return the task as it was
        (None: its stored record could not be read).
        Raises ``TemplateProtected`` for a template without ``force``, ``TaskNotFound``."""
        with self._lock:
            task = (self._templates.get(task_id) or self._cache.get(task_id)
                    or self._closing.get(task_id) or self._evicted.get(task_id)
                    or self.writer.pending_task(task_id))
        meta = None if task is not None else self._read_row(self.store.get_meta, task_id,
                                                                 damaged="")
        if task is None and meta is None:
            raise TaskNotFound(f"task {task_id} not found")
        if is_template_id(task_id) and not force:
            raise TemplateProtected(f"{task_id} is a template; delete it with force=true")
        with self._lock:
            for level in (self._templates, self._cache, self._closing, self._evicted,
                          self._clean, self._template_fit):  # (an id may be made again)
                level.pop(task_id, None)
            self._unsaved.discard(task_id)
            self._unreadable.discard(task_id)
            self._last_delete += 1
            self._deleted[task_id] = self._last_delete
            self._deleted.move_to_end(task_id)
            while len(self._deleted) > DELETED_SEEN:
                self._forgotten = max(self._forgotten, self._deleted.popitem(last=False)[1])
            self._deleting[task_id] = self._deleting.get(task_id, 0) + 1
            mark = self.writer.forget(task_id)  # (a queued write no longer revives it:
            # _get_cached; one of a task put under the id from now on is written)
        try:  # the row: behind the writer's current write (or another connection's lock), so a
            # lookup may read it meanwhile; it takes it as deleted (a review, session 49)
            self.writer.delete(task_id, mark)
        finally:
            with self._lock:  # (the mark and the count together: a lookup between the two
                self.writer.release(task_id, mark)  # took a newer task's row for stale)
                n = self._deleting.pop(task_id) - 1
                if n:
                    self._deleting[task_id] = n
        if task is None:
            try:
                task = _decode(meta, None, task_id, tensors=False)
            except TaskUnreadable:  # gone all the same
                return None
        elif is_busy(task):
            task.stop()
        return task

    def list_all_tasks(self, offset: int = 0, limit: int = 100, by_id: bool = False,
                       after: str | None = None) -> dict:
        """API.md's ``/list`` reply: ids in memory (templates first, then least recently used,
        then those out of the cache kept for their write, queued or refused) and ``limit`` ids
        in the database from ``offset`` (most recently written first, API.md: the first 100;
        ``by_id``: in id order; ``after``: in id order past that id, a cursor that inserts and
        deletes between pages do not shift)."""
        with self._lock:  # + tasks out of the cache the writer holds, served by get_task (a
            # write queued or refused; only refused ones were listed: one evicted before its
            # row landed was listed nowhere)
            cpu = [*self._templates, *self._cache, *self._closing]
            held = set(cpu)
            cpu += [t for t in self.writer.queued if t not in held]
        n_db, db, stored = self.store.listing(offset, limit, by_id, cpu, after)
        only_cpu = len(set(cpu) - stored)
        return {"cpu_cache_count": len(cpu), "database_count": n_db,
                "total_count": n_db + only_cpu, "cpu_tasks": cpu, "db_tasks": db}

    def holds(self, task_id: str, task: Task) -> bool:
        """Whether ``task`` is still the task this manager keeps under ``task_id`` (False: it
        was deleted, or replaced)."""
        with self._lock:
            return any(level.get(task_id) is task
                       for level in (self._cache, self._closing, self._templates, self._evicted))

    def template_ids(self, cfg=None) -> list[str]:
        """Every template's id, stored or reserved (being built), in id order; with ``cfg``
        (a model's config) only those whose state fits that model (``model_mismatch``; a
        database shared with another model holds others). A stored template's fit is read from
        its record's shapes, not its tensors, once: templates never change."""
        with self._lock:
            held = dict(self._templates)
        # (a damaged file: /v1/models was a 500 for good, the UIs that list models broke)
        stored = self.unless_damaged(lambda: self.store.ids(templates=True), [])
        ids = sorted(set(held) | set(stored))
        if cfg is None:
            return ids
        return [tid for tid in ids if self._fits(tid, held.get(tid), cfg)]

    def _fits(self, tid: str, task: Task | None, cfg) -> bool:
        if task is not None:
            return model_mismatch(task, cfg, self.model_digest) is None
        if tid in self._unreadable:
            return False
        known = self._template_fit.get(tid)
        if known is not None and known[0] == cfg:
            return known[1]
        meta = self._read_row(self.store.get_meta, tid, damaged="")  # (damaged: unfit)
        try:
            meta = json.loads(meta) if meta else None
            fit = bool(meta) and stored_mismatch(meta, cfg, self.model_digest) is None \
                and self._in_range(tid, meta)
        except (ValueError, TypeError, KeyError, RecordError):  # unreadable: not usable
            fit = False
        self._template_fit[tid] = (cfg, fit)
        return fit

    def _in_range(self, tid: str, meta: dict) -> bool:
        """Whether a stored template's state fits the loaded model's dtypes (``range_problem``).
        Its tensors are read (once: ``_template_fit``) only when stored in a wider type than
        the slots keep (made while the server ran fp32 states): /v1/models listed such a
        template until a request from it was refused (session 41's note)."""
        model = getattr(self.loader, "model", None)
        if model is None:
            return True
        slot = {"shift": model.dtype, "wkv": model.state_dtype}
        if not any(wider(DTYPES[e["dtype"]], slot[e["name"]])
                   for e in meta.get("tensors", ()) if e["name"] in slot):
            return True
        row = self._read_row(self.store.get, tid, damaged=_DAMAGED)
        if row is None or row is _DAMAGED:
            return False
        data = decode_tensors(json.loads(row[0]), row[1])
        return range_problem(State(data["shift"], data["wkv"]), *slot.values()) is None

    # ---- persistence hooks --------------------------------------------------------------
    def track(self, task: Task) -> None:
        """Write ``task`` whenever it finishes (persistent ids, while this manager holds it)."""
        with self._lock:
            if task in self._hooks:
                return

            def on_event(t: Task) -> None:
                if t.status == Status.FINISHED:
                    self._on_finished(t)

            self._hooks[task] = on_event
        task.subscribe(on_event)

    def flush(self) -> None:
        """Queue every changed persistent task at rest, then wait until all writes are done."""
        with self._lock:
            jobs = [self._job_locked(i, t) for i, t in self._cache.items()
                    if not is_temporary_id(i) and not is_busy(t)]
        self._submit([j for j in jobs if j])
        self.writer.flush()

    def store_status(self) -> dict:
        """For ``/health``: whether the database takes writes, and the tasks it refused (kept
        in memory and tried again: ``AsyncWriter``); ``error``: what SQLite said when it last
        refused a write, the writer's or a request's own (``as_template``, an import, a
        delete: ``TaskStore.refused``), until one succeeds; ``damaged``: what it said when a
        read found the file damaged (until a restart)."""
        unsaved = self.writer.unsaved
        error = self.writer.last_error or self.store.refused
        return {"ok": not unsaved and error is None and self._damage is None,
                "unsaved": len(unsaved), "error": error, "damaged": self._damage}

    def note_damage(self, e: BaseException) -> None:
        """A read found the database damaged: logged (the first time) and shown by /health."""
        if self._damage is None:
            self._damage = f"{type(e).__name__}: {e}"
            log.error(f"the task database {self.store.path} is damaged ({e}): rows on its "
                      "damaged pages cannot be read (most can be deleted), writes there fail; "
                      "restore it from a backup (README: \"The task database\")")

    def unless_damaged(self, read, fallback):
        """``read()``, or ``fallback`` when SQLite finds the file damaged under it ("database
        disk image is malformed": ``note_damage``); other errors are raised. The readable rows
        of a damaged file are served (session 41's QA: it was a traceback at start, or a 500 at
        every listing after)."""
        try:
            return read()
        except sqlite3.DatabaseError as e:
            if not is_damage_error(e):
                raise
            self.note_damage(e)
            return fallback

    def _read_row(self, read, task_id: str, damaged=None):
        """``read(task_id)``; a row on a damaged page is ``TaskUnreadable`` (a 500 that says it
        can be deleted), or ``damaged`` when given (its delete goes on: ``delete`` with force
        was a 500 for such a row)."""
        row = self.unless_damaged(lambda: read(task_id), _DAMAGED)
        if row is not _DAMAGED:
            return row
        if damaged is not None:
            return damaged
        raise TaskUnreadable(
            f"reading task {task_id} from the task database {self.store.path} "
            f"(RWKV_TASK_DB_PATH) failed ({self._damage}). The file is damaged: a record on its "
            "damaged pages can only be deleted (restore the file from a backup to get it back)")

    def close(self) -> None:
        """Flush, stop the writer thread and close the database (idempotent). Tasks the
        database still refuses are logged as lost (``writer.unsaved`` keeps their ids)."""
        if self._closed:
            return
        self._closed = True
        self.flush()
        self.writer.close()
        try:
            self.store.close()
        except TaskStoreError as e:  # (a full disk at the last checkpoint: the rows are in
            log.error(f"closing the task database: {e}")  # its WAL, read back at the next
            # start; a traceback here ended the shutdown before "Shutdown complete")

    # ---- internals ------------------------------------------------------------------------
    def _pin_locked(self, task_id: str) -> None:
        self._pins[task_id] = self._pins.get(task_id, 0) + 1

    def _stale_row_locked(self, task_id: str) -> bool:
        """Whether a row of ``task_id`` read now may be one a delete under way is removing
        (caller holds the lock); not when each such delete found a newer task's row landed."""
        return task_id in self._deleting and not self.writer.row_is_newer(task_id)

    def _deleted_since(self, task_id: str, start: int) -> bool | None:
        """Whether ``task_id`` was deleted after deletion number ``start`` (caller holds the
        lock); None when more deletions came since than are remembered (unknown)."""
        if self._last_delete == start:
            return False
        if self._deleted.get(task_id, 0) > start:
            return True
        return None if self._forgotten > start else False

    def _put_template(self, task_id: str, task: Task, max_templates: int = 0) -> str:
        """``max_templates`` is counted under the lock that reserves the id: counted before it
        (by the HTTP routes alone), two imports that both found room stored one template too
        many (a review, session 14)."""
        with self._lock:
            if task_id in self._templates or self.writer.pending_task(task_id) is not None \
                    or self.writer.template_put_under_way(task_id) or self.store.contains(task_id):
                raise TemplateExists(f"template {task_id} exists; templates are never overwritten")
            if max_templates and self._template_count_locked() >= max_templates:
                raise TooManyTemplates(f"the limit of {max_templates} templates is reached")
            task.task_id = task_id
            self._templates[task_id] = task  # reserved: a concurrent put of the id fails
            busy = is_busy(task)
            if busy:
                self._unsaved.add(task_id)
            else:  # (a delete from now on voids the write: no row lands after it)
                seq = self.writer.reserve_template(task_id)
        self.track(task)
        if busy:
            return task_id
        try:
            written = self.writer.write_template(task_id, snapshot(task), seq)
        except BaseException as e:  # not stored: not kept (a full disk left a template in
            self.writer.end_template_put(task_id, seq)  # memory only, served until a restart
            with self._lock:  # lost it); the id is free again
                if self._templates.get(task_id) is task:
                    del self._templates[task_id]
            if isinstance(e, DuplicateTaskId):
                raise TemplateExists(f"template {task_id} exists") from e
            raise
        with self._lock:  # (not ours now: deleted, or closed, while it was written)
            if written and self._templates.get(task_id) is task:
                self._clean[task_id] = signature(task)
        if not written:  # deleted (force) before its row was written: none was
            return task_id
        log.info(f"template {task_id} stored ({len(task.history)} tokens of context)")
        return task_id

    def _template_count_locked(self) -> int:
        """Templates stored, or reserved and not yet written (``_templates`` holds both)."""
        return len(set(self.store.ids(templates=True)).union(self._templates))

    def _get_cached(self, task_id: str, pin: bool = False):
        """``(task or None, write jobs from evictions)``; revives closed/queued tasks; ``pin``:
        pins a task it finds (not a template: never evicted)."""
        with self._lock:
            if task_id in self._templates:
                return self._templates[task_id], []
            if task_id in self._cache:
                self._cache.move_to_end(task_id)
                task, jobs = self._cache[task_id], []
            else:
                task = (self._closing.pop(task_id, None) or self._revive_locked(task_id)
                        or self.writer.pending_task(task_id))
                if task is None:
                    return None, []
                if is_template_id(task_id):
                    self._templates[task_id] = task
                    return task, []
                self._cache[task_id] = task  # reopened
                jobs = None
            if pin:
                self._pin_locked(task_id)
            return task, self._evict_locked() if jobs is None else jobs

    def _on_finished(self, task: Task) -> None:
        """A tracked task finished (scheduler or copy-back thread): write it if it is still
        ours and not running again (a continue may land meanwhile)."""
        tid = task.task_id
        with self._lock:
            with task._lock:  # (a continue changes the task under it: the row is the finished
                # round's, not torn by a continue landing meanwhile; session 54's review)
                if task.held:  # continued and submitted since it finished: its CPU state
                    return  # lags its tokens (a prefill under way); that round's end writes it
                job = self._finished_job_locked(tid, task)
            # tasks busy at their put stayed past capacity: evicted once they finish (a burst
            # of 200 creates left 165 in memory at a capacity of 10 until the next put)
            jobs = self._evict_locked() if len(self._cache) > self.capacity else []
        self._submit(([job] if job else []) + jobs)

    def _finished_job_locked(self, tid: str, task: Task) -> WriteJob | None:
        """``_on_finished``'s write of ``task``, if it is still ours (caller holds the lock and
        the task's)."""
        if is_template_id(tid):
            if tid in self._unsaved and self._templates.get(tid) is task:
                self._unsaved.discard(tid)
                return self._job_both_locked(tid, task, template=True)
        elif not is_temporary_id(tid):
            if self._closing.get(tid) is task:
                del self._closing[tid]
                return self._job_both_locked(tid, task)
            if self._cache.get(tid) is task:
                return self._job_both_locked(tid, task)
            if self._evicted.get(tid) is task:  # continued by the application after its
                # eviction (that round was lost; session 28's QA): back in the cache
                self._cache[tid] = self._revive_locked(tid)
                return self._job_both_locked(tid, task)
        return None

    def _job_locked(self, task_id: str, task: Task, template: bool = False) -> WriteJob | None:
        """A write of ``task`` unless its content was written already (caller holds the lock;
        the task's is taken here: ``continue_gen`` changes the task under it, and a snapshot
        during one was torn)."""
        with task._lock:
            return self._job_both_locked(task_id, task, template)

    def _job_both_locked(self, task_id: str, task: Task,
                         template: bool = False) -> WriteJob | None:
        """``_job_locked`` with the task's lock held too."""
        sig = signature(task)
        if same_content(self._clean.get(task_id), sig):
            return None
        job = self.writer.prepare(task_id, task, snapshot(task), template)
        self._clean[task_id] = sig
        return job

    def _evict_locked(self) -> list[WriteJob]:
        """Drop least recently used tasks beyond capacity (skipping busy ones); their writes."""
        jobs, over = [], len(self._cache) - self.capacity
        for tid in list(self._cache):
            if over <= 0:
                break
            task = self._cache[tid]
            if is_busy(task) or tid in self._pins:
                continue
            del self._cache[tid]
            over -= 1
            if not is_temporary_id(tid):
                job = self._job_locked(tid, task)
                if job:
                    jobs.append(job)
                self._evicted[tid] = task  # (while the application holds it)
                if tid in self._clean:
                    self._evicted_clean[task] = self._clean[tid]
            self._clean.pop(tid, None)
        return jobs

    def _revive_locked(self, task_id: str) -> Task | None:
        """The evicted task ``task_id`` if it still lives (taken out of ``_evicted``), its
        ``_clean`` signature restored."""
        task = self._evicted.pop(task_id, None)
        if task is not None and task in self._evicted_clean:
            self._clean[task_id] = self._evicted_clean.pop(task)
        return task

    def _submit(self, jobs: list[WriteJob]) -> None:
        for job in jobs:  # outside our lock: submit blocks while the queue is full
            self.writer.submit(job)

    def _forget_clean(self, task_ids: list[str]) -> None:
        """Rows pruned, or writes failed for a reason not the database's (a record that cannot
        be encoded; those the database refuses the writer keeps and retries): tasks still in
        memory are written again. Such a template (put while busy, written when it finished) is
        not kept, as ``_put_template`` does: it was served from memory until a restart lost it."""
        with self._lock:
            for tid in task_ids:
                self._clean.pop(tid, None)
                held = self._evicted.get(tid)  # (its signature came back with it, unwritten)
                if held is not None:
                    self._evicted_clean.pop(held, None)
                tpl = self._templates.get(tid)
                if tpl is not None and tpl is self.writer.pending_task(tid) \
                        and not self._stored(tid):  # (pending: not deleted meanwhile)
                    del self._templates[tid]
                    self._template_fit.pop(tid, None)
                    log.error(f"template {tid} was not stored: it is dropped")

    def _stored(self, task_id: str) -> bool:
        """Whether ``task_id`` has a row; False when the database cannot say (the error that
        failed its write, as a rule: a disk I/O error). Raising, it ended the writer thread
        (``_forget_clean`` runs there): later writes were never done, a flush waited for ever."""
        try:
            return self.store.contains(task_id)
        except sqlite3.Error as e:
            log.error(f"checking whether {task_id} was stored failed: {e}")
            return False


_DAMAGED = object()  # (``_read_row``: the row could not be read)


def _decode(meta, blob, task_id: str, **kw) -> Task:
    """``decode_task`` of a stored row; ``TaskUnreadable`` if it cannot be (another version's
    record, a damaged one: a KeyError or JSONDecodeError was a bare 500)."""
    try:
        return decode_task(meta, blob, task_id=task_id, **kw)
    except Exception as e:
        raise TaskUnreadable(f"the stored record of {task_id} cannot be read "
                             f"({type(e).__name__}: {e}); it can only be deleted") from e


DELETED_SEEN = 4096  # deletions remembered for reads from the database that overlap them
_manager: TaskManager | None = None
_manager_lock = threading.Lock()


def get_task_manager() -> TaskManager:
    """The process-wide TaskManager built from settings (closed at interpreter exit)."""
    global _manager
    with _manager_lock:
        if _manager is None or _manager._closed:
            import atexit

            _manager = TaskManager()
            atexit.register(_manager.close)
        return _manager
