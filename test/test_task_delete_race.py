"""A task put again under its id while a delete of that id is under way (the SDK's
``put_task`` with an id of the application's; sessions 49-50 left it open): the delete takes
the old task, never the new one. Before, the writer's ``delete`` forgot the id's queued writes a
second time (the new task's write was skipped: gone) and deleted the row whatever had been
written since (the new task's row: gone, and its content marked written, so never again)."""

from __future__ import annotations

import threading

from task_fakes import delete_held_at_the_row, make_task

from server.task.manager import TaskManager
from server.task.serialize import snapshot

ID = "TASK_same"


def manager(db):
    return TaskManager(db_path=db, capacity=4, queue_size=8, max_db_size=1000)


def stored_tokens(db) -> list[int] | None:
    """The history of ``ID`` as a fresh manager reads it from the database (None: no row)."""
    tm = manager(db)
    try:
        task = tm.get_task(ID)
        return None if task is None else list(task.history)
    finally:
        tm.close()


class _HeldEncode:
    """A write whose encoding waits for ``release``: the writer thread is busy meanwhile."""

    def __init__(self):
        self.release, self.started = threading.Event(), threading.Event()
        self.snap = snapshot(make_task(9, task_id="TASK_other"))

    def encode(self):
        self.started.set()
        assert self.release.wait(10)
        return self.snap.encode()


def put_and_close(tm, i):
    tm.put_task(ID, make_task(i, task_id=ID))
    assert tm.close_task(ID)  # written and dropped from memory: the row is all there is


def test_a_put_written_during_the_delete_keeps_its_row(tmp_path):
    db = str(tmp_path / "tasks.db")
    tm = manager(db)
    put_and_close(tm, 1)
    tm.writer.flush()
    old, new = make_task(1).history, make_task(2).history
    assert old != new and stored_tokens(db) == old
    release = delete_held_at_the_row(tm, ID)
    put_and_close(tm, 2)
    tm.writer.flush()  # the new task's row landed before the delete reached the row
    release()
    tm.writer.flush()
    assert tm.get_task(ID) is not None and list(tm.get_task(ID).history) == new
    tm.close()
    assert stored_tokens(db) == new


def test_a_put_queued_during_the_delete_is_written_after_it(tmp_path):
    db = str(tmp_path / "tasks.db")
    tm = manager(db)
    put_and_close(tm, 1)
    tm.writer.flush()
    held = _HeldEncode()
    tm.writer.submit(tm.writer.prepare("TASK_other", make_task(9), held))
    assert held.started.wait(10)  # the writer is busy: what is queued now waits
    release = delete_held_at_the_row(tm, ID)
    put_and_close(tm, 2)  # queued behind the held write
    release()  # the old row goes now
    held.release.set()
    tm.writer.flush()
    tm.close()
    assert stored_tokens(db) == make_task(2).history


def test_a_delete_with_no_put_meanwhile_still_deletes_the_row(tmp_path):
    db = str(tmp_path / "tasks.db")
    tm = manager(db)
    put_and_close(tm, 1)
    tm.writer.flush()
    release = delete_held_at_the_row(tm, ID)
    release()
    tm.close()
    assert stored_tokens(db) is None
