"""Review (session 32) of the writer's kept writes (session 31): what a retry tries."""

from __future__ import annotations

import sqlite3
import time

from task_fakes import make_task

from server.task import writer
from server.task.manager import TaskManager


def manager(db, capacity=1):
    return TaskManager(db_path=db, capacity=capacity, queue_size=4, max_db_size=1000)


def _until(cond, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_one_write_the_disk_still_refuses_does_not_hold_back_the_others(tmp_path, monkeypatch):
    """Two kept writes; space comes back for the smaller one only (a nearly full disk takes a
    short task's row, not a long one's). The retry stopped at the first refusal, oldest
    first: the write the disk would take was never tried, and at close it was named lost."""
    monkeypatch.setattr(writer, "RETRY_FAILED_S", 0.05)
    db = str(tmp_path / "tasks.db")
    tm = manager(db)
    real = tm.store.put
    big = {"TASK_big"}

    def full(*a, **k):
        raise sqlite3.OperationalError("database or disk is full")

    def nearly_full(task_id, *a, **k):
        if task_id in big:
            raise sqlite3.OperationalError("database or disk is full")
        return real(task_id, *a, **k)

    monkeypatch.setattr(tm.store, "put", full)
    tm.put_task("TASK_big", make_task(1))
    tm.put_task("TASK_small", make_task(2))
    tm.writer.flush()
    assert tm.writer.unsaved == ["TASK_big", "TASK_small"]
    monkeypatch.setattr(tm.store, "put", nearly_full)
    saved = _until(lambda: tm.store.contains("TASK_small"), timeout=2.0)
    tm.close()
    assert saved and tm.writer.unsaved == ["TASK_big"], tm.writer.unsaved


def test_a_deleted_unsaved_task_leaves_no_error_in_the_health_report(tmp_path, monkeypatch):
    """A task whose write the disk refused, then deleted: nothing is unsaved, yet /health's
    task_store kept the old error beside ``ok: true`` until some later write landed
    (``last_error`` is the refusal *while writes are unsaved*)."""
    db = str(tmp_path / "tasks.db")
    tm = manager(db)

    def full(*a, **k):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(tm.store, "put", full)
    tm.put_task("TASK_a", make_task(1))
    tm.writer.flush()
    assert tm.store_status()["unsaved"] == 1
    tm.delete_task_from_any_level("TASK_a")
    try:
        assert tm.store_status() == {"ok": True, "unsaved": 0, "error": None,
                                       "damaged": None}
    finally:
        tm.close()


def test_an_unsaved_task_out_of_the_memory_cache_is_listed(tmp_path, monkeypatch):
    """A task whose write the disk refused, then pushed out of the memory cache: served by
    ``get_task`` (the writer keeps it), but ``/list`` showed it in neither ``cpu_tasks`` nor
    ``db_tasks`` and ``total_count`` left it out, for as long as the disk refused it."""
    db = str(tmp_path / "tasks.db")
    tm = manager(db, capacity=1)

    def full(*a, **k):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(tm.store, "put", full)
    try:
        tm.put_task("TASK_a", make_task(1))
        tm.put_task("TASK_b", make_task(2))  # (capacity 1: TASK_a leaves the cache)
        tm.writer.flush()
        assert tm.writer.unsaved == ["TASK_a", "TASK_b"]
        assert tm.get_task("TASK_a") is not None
        listed = tm.list_all_tasks()
        assert sorted(listed["cpu_tasks"]) == ["TASK_a", "TASK_b"], listed
        assert listed["total_count"] == 2 and listed["cpu_cache_count"] == 2, listed
    finally:
        tm.close()
