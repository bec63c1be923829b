"""A task's finished round and its write (``TaskManager._on_finished``): a continue racing the
write stores one moment's row, never a torn one, and a write after the manager closed never
blocks (session 54's reviews; each test failed before its fix)."""

import threading

import pytest
from task_fakes import make_task

from server.task.manager import TaskManager
from server.task.task import Status


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "tasks.db")


def manager(db, capacity=3):
    return TaskManager(db_path=db, capacity=capacity, queue_size=4, max_db_size=1000)


class _PausingList(list):
    """A token list whose first iteration (``snapshot`` copying it) waits, up to ``wait_s``,
    for ``go``: another thread's change of the task lands inside the snapshot, as a thread
    switch there lets it."""

    def __init__(self, items, wait_s=1.0):
        super().__init__(items)
        self.reached, self.go, self.wait_s = threading.Event(), threading.Event(), wait_s

    def __iter__(self):
        if not self.reached.is_set():
            self.reached.set()
            self.go.wait(self.wait_s)
        return super().__iter__()


def test_a_continue_during_the_finish_write_leaves_a_consistent_row(db):
    """A continue landing while the finished round's write takes its snapshot (the scheduler's
    ``_on_finished``): the row mixed the two (FINISHED, its output and finish reason gone, or
    the round's last token both current and pending); a restart read that back."""
    tm = manager(db)
    task = make_task(1, "TASK_race", status=Status.READY)
    tm.put_task("TASK_race", task)
    want_out, want_cur = list(task.output), task.current_token
    task.history = hist = _PausingList(task.history)
    finisher = threading.Thread(target=task._finish, args=("length",))  # the scheduler's
    finisher.start()
    assert hist.reached.wait(10)  # its snapshot is under way
    cont = threading.Thread(target=task.continue_gen, args=([5, 6],))  # a continue request
    cont.start()
    cont.join(0.3)  # (done, or waiting for the snapshot to end)
    hist.go.set()
    finisher.join(10)
    cont.join(10)
    assert not finisher.is_alive() and not cont.is_alive()
    assert task.status == Status.PREFILL and task.pending == [want_cur, 5, 6]
    tm.writer.flush()  # the rows as a kill -9 now would leave them
    restarted = manager(db)
    row = restarted.get_task("TASK_race")
    assert row.status == Status.FINISHED and row.finish_reason == "length"
    assert row.output == want_out and row.current_token == want_cur and row.pending == []
    restarted.close()
    tm.close()


def test_a_round_continued_and_submitted_before_the_finish_write_is_not_written(db):
    """The continue, its submit and a prefill of part of its prompt all land between the
    round's FINISHED and the manager's write (on the copy-back thread): the row held tokens
    the state it stored had not consumed (a restart continued from the wrong state), or, the
    task decoding already, the write raised ``TaskBusy`` in the finish callback."""
    tm = manager(db)
    task = make_task(1, "TASK_sub", status=Status.READY)
    hist, state = list(task.history), task.state
    tm.put_task("TASK_sub", task)
    real, raised = tm._on_finished, []

    def continued_first(t):
        t.continue_gen([5, 6])
        t._stop_hook = lambda _t: None  # add_task's mark: the scheduler holds it
        t.history.extend(t.pending[:2])  # the prefiller fed two tokens (the state in its slot)
        del t.pending[:2]
        try:
            real(t)
        except Exception as e:
            raised.append(e)
            raise

    tm._on_finished = continued_first
    task._finish("length")
    tm.writer.flush()
    assert not raised
    restarted = manager(db)
    row = restarted.get_task("TASK_sub")
    assert row is None or (row.history == hist and row.state.wkv.equal(state.wkv))
    restarted.close()
    tm.close()


def test_a_task_finishing_after_the_manager_closed_never_blocks(db):
    """An SDK closing its TaskManager before its scheduler: tasks finishing later queued writes
    to a writer that had stopped; once its queue was full the finishing thread (the
    scheduler's) blocked for ever. Such a write is now refused at once, and logged."""
    from loguru import logger

    tm = TaskManager(db_path=db, capacity=8, queue_size=1, max_db_size=1000)
    tasks = [make_task(1, f"TASK_{i}", status=Status.READY) for i in range(4)]
    for i, task in enumerate(tasks):
        tm.put_task(f"TASK_{i}", task)
    tm.close()
    lines: list[str] = []
    sink = logger.add(lines.append, level="ERROR")
    try:
        finisher = threading.Thread(target=lambda: [t._finish("length") for t in tasks],
                                    daemon=True)
        finisher.start()
        finisher.join(5)
        assert not finisher.is_alive()  # (it blocked on the full queue)
    finally:
        logger.remove(sink)
    assert any("TASK_3" in line and "closed" in line for line in lines), lines
