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
