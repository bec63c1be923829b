"""Regressions found by the scheduler chaos test (test_scheduler_chaos.py), each minimised."""

from server.scheduler import DynamicScheduler
from server.task.task import Status, Task


def test_a_round_chained_from_the_finish_callback_is_waited_for(tiny_loader):
    """A finish_callback that continues its task and resubmits it (chaining rounds, on the
    copy-back thread) used to have ``wait()`` return at once: the finish set the task's done
    flag after the callback had started the next round, so a caller saw a queued task as
    finished (and could continue and submit it a second time)."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    rounds = []

    def again(tokens):
        rounds.append(list(tokens))
        if len(rounds) == 1:
            task.continue_gen([300, 301], max_tokens=3)
            sched.add_task(task)

    task = Task([400, 401, 402], max_tokens=2, temperature=0.0, finish_callback=again)
    sched.start_daemon()
    try:
        sched.add_task(task)
        assert task.wait(10)
        assert task.status == Status.FINISHED and task.finish_reason == "length"
        assert [len(r) for r in rounds] == [2, 3] and task.output == rounds[1]
    finally:
        sched.shutdown()


def test_a_finish_callback_resubmitting_before_the_slot_is_cleared(tiny_loader, monkeypatch):
    """The copy-back thread can finish a task (and run its finish_callback, which resubmits it)
    before the scheduler thread has cleared its slot: add_task refused it as "already queued or
    in a slot" and the task, continued but never queued, was lost (seen in the chaos test on a
    loaded machine). Forced here: the scheduler waits for the copy-back right after handing the
    task to it."""
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    real = sched.engine.unload

    def unload_then_wait(slots, tasks, then):
        real(slots, tasks, then)
        sched.engine.copyback.wait_idle(10)  # the task is finished (and resubmitted) here

    monkeypatch.setattr(sched.engine, "unload", unload_then_wait)
    rounds, errors = [], []

    def again(tokens):
        rounds.append(list(tokens))
        if len(rounds) == 1:
            task.continue_gen([300, 301], max_tokens=3)
            try:
                sched.add_task(task)
            except ValueError as e:
                errors.append(e)

    task = Task([400, 401, 402], max_tokens=2, temperature=0.0, finish_callback=again)
    sched.add_task(task)
    sched.run()
    assert errors == [] and [len(r) for r in rounds] == [2, 3]
    assert task.status == Status.FINISHED and task.output == rounds[1]


def test_a_finish_callback_failing_after_continuing_its_task_ends_it(tiny_loader):
    """A finish_callback that continued its task (``continue_gen``) and failed before
    ``add_task`` queued it (its own error, or add_task's: a full queue, a bad parameter) left
    the task READY in no scheduler: ``wait()`` blocked for ever (session 29's review). The
    callback's error is logged as any callback's, and the round it began ends at once, an
    error naming it. Without a timeout: a regression fails here instead of hanging."""
    first_rounds = []

    def continue_then_fail(tokens):
        if first_rounds:
            return
        first_rounds.append(list(tokens))
        task.continue_gen([300, 301], max_tokens=3)
        raise RuntimeError("the callback failed before add_task")

    task = Task([400, 401, 402], max_tokens=2, temperature=0.0,
                finish_callback=continue_then_fail)
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    sched.start_daemon()
    try:
        sched.add_task(task)
        assert task.wait(10), "wait() blocked: the continued task was never queued"
        assert task.status == Status.FINISHED and task.finish_reason == "error"
        assert "the callback failed before add_task" in task.error
        assert [len(r) for r in first_rounds] == [2] and task.output == []
        task.continue_gen(max_tokens=2)  # it may run again: the prompt it was given first
        sched.add_task(task)
        assert task.wait(10) and task.finish_reason == "length" and len(task.output) == 2
    finally:
        sched.shutdown()
