"""The Task API reads tasks that the scheduler thread may change at any moment: a reply marked
finished must carry the whole round, and a copy of a state (fork, as_template, export) must
not mix two moments."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest
from fastapi import HTTPException

from server.api.task_service import TaskService
from server.task.task import Status, Task, default_tokenizer


class _FinishesAfterARead:
    """The task's lock: the first time a reader leaves it, the scheduler thread appends the
    round's last token and finishes the task (as a pulse that ends it would)."""

    def __init__(self, task: Task, last: int, reason: str):
        self.real, self.task, self.last, self.fired = threading.RLock(), task, last, False
        self.reason = reason

    def __enter__(self):
        return self.real.__enter__()

    def __exit__(self, *exc):
        self.real.__exit__(*exc)
        if not self.fired:
            self.fired = True
            self.task._append_output([self.last])
            self.task._finish(self.reason, "injected" if self.reason == "error" else None)


@pytest.fixture(scope="module")
def tokenizer():
    return default_tokenizer()


def _running(tokenizer, reason: str = "length") -> Task:
    task = Task(task_id="TASK_r", max_tokens=3, temperature=0.0)
    task.tokenizer = tokenizer
    task.status = Status.RUNNING
    task._append_output(tokenizer.encode("ab"))
    task._lock = _FinishesAfterARead(task, tokenizer.encode("c")[0], reason)
    return task


def test_a_result_marked_finished_has_the_whole_round(tokenizer):
    """get_result read the tokens, then the status: a task finishing between the two came
    back as finished with its last token missing, and a client stops polling on finished
    (a review, session 49)."""
    service = SimpleNamespace(loader=SimpleNamespace(tokenizer=tokenizer),
                              reply=TaskService.reply)
    task = _running(tokenizer)
    first = TaskService.result(service, task)
    assert task.is_finished  # (the finish came during the reply)
    assert (first.result, first.finished) == ("ab", False)
    again = TaskService.result(service, task)
    assert (again.result, again.finished) == ("abc", True)


def test_a_round_that_fails_during_the_read_is_an_error(tokenizer):
    """The error check came before the read: a task failing between the two came back as
    finished text (a review, session 49)."""
    service = SimpleNamespace(loader=SimpleNamespace(tokenizer=tokenizer),
                              reply=TaskService.reply)
    with pytest.raises(HTTPException) as e:
        TaskService.result(service, _running(tokenizer, "error"))
    assert e.value.status_code == 500 and "injected" in e.value.detail


def test_a_finished_status_counts_the_whole_round(tokenizer):
    task = _running(tokenizer)
    n = len(task.output)
    info = TaskService.info(task)
    assert task.is_finished
    assert (info.status, info.generated_buf) == (int(Status.RUNNING), n)
    info = TaskService.info(task)
    assert (info.status, info.generated_buf) == (int(Status.FINISHED), n + 1)


def _copy_during_which(change):
    """``TaskService.unheld`` over a copy during which ``change(task)`` runs (another request
    and the scheduler, between the copy's start and end): the copy, or the 409 it raised."""
    async def store(fn, *args):
        return fn(*args)

    service = SimpleNamespace(store=store)
    task = Task(task_id="TASK_c", max_tokens=3, temperature=0.0)
    task.status = Status.FINISHED

    def copy(src):
        out = list(src.history)
        change(src)
        return out
    try:
        return asyncio.run(TaskService.unheld(service, copy, task))
    except HTTPException as e:
        return e.status_code, e.detail


def _whole_round(task):  # a continue fed and finished within the copy
    task.continue_gen([1, 2], max_tokens=0)
    task._finish("length")


def test_a_copy_spanning_a_whole_round_is_refused():
    """The copy checked only that the task was not running when it ended: a continue whose
    whole round ran during it (a few tokens to feed) passed, the copy mixing the states before
    and after (a review, session 49)."""
    assert _copy_during_which(lambda task: None) == []
    status, detail = _copy_during_which(_whole_round)
    assert status == 409 and "while it was being copied" in detail, detail
