"""Stop requests from handlers: errors swallowed, repeated until the task has finished."""

import asyncio
import threading

from server.api import stopping
from server.task.task import Task


class RacyHook:
    """A scheduler stop hook that misses the first ``misses`` requests (one raises, one is lost)."""

    def __init__(self, task: Task, misses: int):
        self.task, self.misses, self.calls = task, misses, 0

    def __call__(self, task: Task) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("Set changed size during iteration")
        if self.calls <= self.misses:
            return  # lost: the task was between queue and slot
        threading.Timer(0.01, task._finish, args=("abort",)).start()


def racy_task(misses: int) -> tuple[Task, RacyHook]:
    task = Task(task_id="TMP_x")
    hook = RacyHook(task, misses)
    task._stop_hook = hook
    return task, hook


def test_stop_tasks_never_raises_and_skips_finished():
    task, hook = racy_task(misses=2)
    stopping.stop_tasks([task])
    assert task.stop_requested and hook.calls == 1
    done = Task(task_id="TMP_y")
    done._finish("stop")
    stopping.stop_tasks([done])
    assert not done.stop_requested


def test_stop_and_wait_repeats_until_finished(monkeypatch):
    monkeypatch.setattr(stopping, "RETRY_S", 0.01)
    task, hook = racy_task(misses=3)
    assert asyncio.run(asyncio.wait_for(stopping.stop_and_wait(task), 5))
    assert task.is_finished and task.finish_reason == "abort" and hook.calls >= 4


def test_stop_in_background_keeps_asking(monkeypatch):
    monkeypatch.setattr(stopping, "RETRY_S", 0.01)
    task, hook = racy_task(misses=3)

    async def main():
        stopping.stop_in_background([task])
        assert len(stopping._reapers) == 1
        for _ in range(500):
            if task.is_finished and not stopping._reapers:
                return
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert task.is_finished and hook.calls >= 4 and not stopping._reapers


def test_stop_and_wait_gives_up_on_a_stuck_task(monkeypatch):
    monkeypatch.setattr(stopping, "RETRY_S", 0.01)
    task, hook = racy_task(misses=10 ** 9)
    assert asyncio.run(stopping.stop_and_wait(task, limit=0.2)) is False
    assert not task.is_finished and hook.calls > 3


def test_stop_round_repeats_until_the_round_is_over(monkeypatch):
    """``/stop``'s wait (``stop_round``): a missed request is repeated until the task has
    finished."""
    monkeypatch.setattr(stopping, "RETRY_S", 0.01)
    task, hook = racy_task(misses=3)
    assert asyncio.run(asyncio.wait_for(stopping.stop_round(task, 5), 5))
    assert task.is_finished and task.finish_reason == "abort" and hook.calls >= 4


def test_stop_round_leaves_a_round_another_request_began(monkeypatch):
    """A round begun by a continue between the stopped round's end and the wait's next check
    is not stopped (repeated stop requests of ``stop_and_wait`` would stop it too), and the
    wait ends at once instead of running to its limit."""
    monkeypatch.setattr(stopping, "RETRY_S", 0.05)
    task = Task(task_id="TASK_x")
    calls = []

    def hook(t: Task) -> None:  # the scheduler ends the round; a continue begins the next
        calls.append(1)
        if len(calls) == 1:
            t._finish("abort")
            t.continue_gen()
            t._stop_hook = hook  # (queued again)

    task._stop_hook = hook

    async def main() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        return await stopping.stop_round(task, 5), loop.time() - t0

    over, waited = asyncio.run(main())
    assert over and waited < 1 and len(calls) == 1
    assert not task.stop_requested and not task.is_finished  # the new round runs on
