"""A task put again under its id while a delete of that id is under way (the SDK's
``put_task`` with an id of the application's; sessions 49-50 left it open): the delete takes
the old task, never the new one. Before, the writer's ``delete`` forgot the id's queued writes a
second time (the new task's write was skipped: gone) and deleted the row whatever had been
written since (the new task's row: gone, and its content marked written, so never again)."""

from __future__ import annotations

import threading

import pytest
from task_fakes import delete_held_at_the_row, make_task

from server.task.manager import TaskManager
from server.task.policy import TemplateExists
from server.task.serialize import snapshot
from server.task.task import Status

ID = "TASK_same"


def manager(db):
    return TaskManager(db_path=db, capacity=4, queue_size=8, max_db_size=1000)


def history(task) -> list[int] | None:
    return None if task is None else list(task.history)


def stored_tokens(db, task_id: str = ID) -> list[int] | None:
    """The history of ``task_id`` as a fresh manager reads it from the database (None: no
    row)."""
    tm = manager(db)
    try:
        return history(tm.get_task(task_id))
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


def test_a_lookup_during_a_delete_that_a_new_task_outran_finds_the_new_task(tmp_path):
    """The new task's row landed while the old task's delete still waited to reach the row:
    a lookup then took the row for the old task's (every row read during a delete was stale)
    and the task was "not found" (a fork of it too) as long as the delete waited; and, once
    that was mended, in the moment after the writer's delete returned (its mark gone, the
    manager's count of deletes under way not yet: a review, session 51)."""
    db = str(tmp_path / "tasks.db")
    tm = manager(db)
    put_and_close(tm, 1)
    tm.writer.flush()
    delete, seen = tm.writer.delete, []

    def delete_then_look(*args, **kwargs):
        out = delete(*args, **kwargs)
        tm.close_task(ID)
        seen.append(history(tm.get_task(ID)))  # (the row, read before the manager's end)
        return out

    tm.writer.delete = delete_then_look
    release = delete_held_at_the_row(tm, ID)
    put_and_close(tm, 2)
    tm.writer.flush()
    assert history(tm.get_task(ID)) == make_task(2).history
    tm.fork_template(ID, "TASK_child")
    release()
    assert seen == [make_task(2).history]
    tm.close()


def test_writes_of_one_id_land_in_the_order_they_were_prepared(tmp_path):
    """A put evicts task #1 of ``ID`` (its write prepared under the manager's lock) and is held
    before queueing it (as on a full queue); #2 is put under the id, closed and written. #1's
    write then landed over #2's row: the database, and a restart, held the older task."""
    db = str(tmp_path / "tasks.db")
    tm = TaskManager(db_path=db, capacity=1, queue_size=8, max_db_size=1000)
    tm.put_task(ID, make_task(1, task_id=ID, status=Status.READY))  # (no write at its put)
    held, go = threading.Event(), threading.Event()
    submit = tm.writer.submit

    def held_submit(job):
        if threading.current_thread().name == "evicting" and job.task_id == ID:
            held.set()
            assert go.wait(10)
        submit(job)

    tm.writer.submit = held_submit
    evicting = threading.Thread(target=tm.put_task, args=("TASK_o", make_task(9)),
                                name="evicting")
    evicting.start()
    assert held.wait(10)  # #1's write prepared, not queued
    put_and_close(tm, 2)
    tm.writer.flush()
    go.set()
    evicting.join(10)
    tm.writer.flush()
    assert history(tm.get_task(ID)) == make_task(2).history
    tm.close()
    assert stored_tokens(db) == make_task(2).history


TPL = "_same"


def held_template_write(tm, task, before: bool = False, after: bool = False):
    """Put ``task`` as template ``TPL`` on a thread held just before its row's write, or just
    after, or both; returns the next hold's release (the put's end once none is left)."""
    holds = [threading.Event() for _ in range(before + after)]  # each: reached, then go
    gos = [threading.Event() for _ in holds]
    write = tm.writer.write_template

    def hold(i):
        holds[i].set()
        assert gos[i].wait(10)

    def held_write(*args, **kwargs):
        mine = threading.current_thread() is putter
        if mine and before:
            hold(0)
        out = write(*args, **kwargs)
        if mine and after:
            hold(len(holds) - 1)
        return out

    tm.writer.write_template = held_write
    putter = threading.Thread(target=tm.put_task, args=(TPL, task))
    putter.start()
    state = {"next": 0}
    assert holds[0].wait(10)

    def release():
        i = state["next"]
        gos[i].set()
        state["next"] = i + 1
        if i + 1 < len(holds):
            assert holds[i + 1].wait(10)
        else:
            putter.join(10)
            assert not putter.is_alive()
    return release


def test_a_template_put_during_a_delete_of_its_id_keeps_its_row(tmp_path):
    """A busy template (no row yet) is deleted with force, the delete held before the row;
    a new template put under the id meanwhile wrote its row, which the delete then removed
    (the template served from memory, gone at a restart)."""
    db = str(tmp_path / "tasks.db")
    tm = manager(db)
    busy = make_task(1, task_id=TPL, status=Status.READY)
    busy._stop_hook = lambda t: None  # handed to a scheduler: busy
    tm.put_task(TPL, busy)
    release = delete_held_at_the_row(tm, TPL, force=True)
    tm.put_task(TPL, make_task(2))
    release()
    tm.close()
    assert stored_tokens(db, TPL) == make_task(2).history


def test_an_older_template_put_never_deletes_a_newer_ones_row(tmp_path):
    """Put A's row is written; a delete (force) removes it; put B stores its own; then A's put
    ended taking the delete for one its row had outrun, and deleted the row: B's."""
    db = str(tmp_path / "tasks.db")
    tm = manager(db)
    release = held_template_write(tm, make_task(1), after=True)
    assert history(tm.delete_task_from_any_level(TPL, force=True)) == make_task(1).history
    tm.put_task(TPL, make_task(2))
    release()
    assert history(tm.get_task(TPL)) == make_task(2).history
    tm.close()
    assert stored_tokens(db, TPL) == make_task(2).history


def test_a_template_deleted_before_its_row_was_written_stays_deleted(tmp_path):
    """A delete (force) ends while put A has reserved the id but not written its row; A's row
    then landed, and a lookup before A's put ended cached it: the deleted template was served,
    listed, and refused a new put of its id until a restart."""
    db = str(tmp_path / "tasks.db")
    tm = manager(db)
    release = held_template_write(tm, make_task(1), before=True, after=True)
    tm.delete_task_from_any_level(TPL, force=True)
    release()  # A's write (void now), then held
    assert tm.get_task(TPL) is None
    release()
    assert tm.get_task(TPL) is None and TPL not in tm.list_all_tasks()["cpu_tasks"]
    tm.put_task(TPL, make_task(2))  # the id is free
    tm.close()
    assert stored_tokens(db, TPL) == make_task(2).history


def test_a_template_put_again_while_a_closed_put_is_written_is_refused(tmp_path):
    """``close_task`` dropped put A's template before A wrote its row; put B of the id then
    took A's place, A's write was void and A's put still said stored: the row was B's (a
    review, session 51). B is refused now, as it was before session 51 (A's row comes)."""
    db = str(tmp_path / "tasks.db")
    tm = manager(db)
    release = held_template_write(tm, make_task(1), before=True)
    assert tm.close_task(TPL)
    with pytest.raises(TemplateExists):
        tm.put_task(TPL, make_task(2))
    release()
    tm.close()
    assert stored_tokens(db, TPL) == make_task(1).history


def test_closing_a_template_while_it_is_written_keeps_it(tmp_path):
    """``close_task`` during the template's put (its row written, the put not yet returned):
    the put took the close for a delete and removed the row; the template was gone."""
    db = str(tmp_path / "tasks.db")
    tm = manager(db)
    release = held_template_write(tm, make_task(1), after=True)
    assert tm.close_task(TPL)
    release()
    assert history(tm.get_task(TPL)) == make_task(1).history
    tm.close()
    assert stored_tokens(db, TPL) == make_task(1).history


# ---- from session 52's mutation testing: behaviour no test pinned down ------------------------
def test_a_delete_after_a_writes_check_still_deletes_its_row(tmp_path):
    """The writer checked a write current, then a delete forgot the id before the row landed
    (the delete came after that write was prepared): the delete still removes the row. A
    write of that task must not count as one put after the delete (``_landed_locked``)."""
    from task_fakes import make_task

    from server.task.manager import TaskManager

    tm = TaskManager(db_path=str(tmp_path / "t.db"), capacity=4, queue_size=8, max_db_size=100)
    w, real = tm.writer, tm.store.put
    marks = []

    def put(task_id, *a, **k):
        marks.append(w.forget(task_id))  # a delete's first step, between check and landing
        return real(task_id, *a, **k)
    tm.store.put = put
    tm.put_task("TASK_a", make_task(1, task_id="TASK_a"))
    tm.close_task("TASK_a")
    w.flush()
    tm.store.put = real
    assert marks and w.delete("TASK_a", marks[0])
    w.release("TASK_a", marks[0])
    assert not tm.store.contains("TASK_a")
    tm.close()
