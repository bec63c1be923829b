"""Stop requests from handlers: errors swallowed, repeated until the task has finished."""

import asyncio
import threading

import anyio

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


class _Req:
    """A request whose client leaves when ``gone`` is set."""

    def __init__(self):
        self.gone = False

    async def is_disconnected(self):
        return self.gone



def test_finish_watched_leaves_no_watcher_behind():
    """Once the task has finished, neither the drain nor a later disconnect touches it: its
    watchers are cancelled (left running, each held the task, its state too, until the
    shutdown, polled the client every 0.25 s, and stopped the task's next round, another
    request's; session 72's mutation review)."""
    task, stops = Task(task_id="TASK_x"), []
    task._stop_hook = lambda t: stops.append(t)

    async def main():
        drain, req = stopping.Drain(), _Req()
        drain.bind(asyncio.get_running_loop())
        threading.Timer(0.05, task._finish, args=("length",)).start()
        assert await stopping.finish_watched(task, drain, req) is False
        await asyncio.sleep(0)
        task.continue_gen()  # a next round, another request's
        req.gone = True
        drain.begin()
        await asyncio.sleep(0.6)
        assert stops == [] and not drain.cut_short(task)
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert others == [], others
    asyncio.run(main())


def test_sse_starlettes_own_shutdown_stops_the_tasks_without_a_drain():
    """``stop_when_draining``'s ``also`` (sse-starlette's shutdown event) stops the tasks
    when the app's drain never began (a server run without run.py)."""
    task, stops = Task(task_id="TMP_y"), []
    task._stop_hook = lambda t: (stops.append(t), t._finish("abort"))

    async def main():
        drain, also = stopping.Drain(), anyio.Event()
        watcher = asyncio.ensure_future(drain.stop_when_draining([task], also=also))
        await asyncio.sleep(0.05)
        also.set()
        await asyncio.wait_for(watcher, 2)
        assert stops == [task] and drain.cut_short(task)
    asyncio.run(main())


def test_stop_in_background_outside_a_loop_still_asks_once():
    """Without a running event loop (a generator finalised outside it) the stop is asked at
    once, not only by a retrying coroutine that cannot be scheduled."""
    task, stops = Task(task_id="TMP_z"), []
    task._stop_hook = lambda t: stops.append(t)
    stopping.stop_in_background([task])
    assert stops == [task]
