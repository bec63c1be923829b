"""Stopping tasks from handlers reliably: requests that never raise, repeated until they land.

``Task.stop()`` is called from the event loop while the scheduler thread moves tasks between the
queue, prefill and decoding slots. A request that arrives in the wrong moment can be missed (or
the hook can raise), so clean-up paths use these helpers: they swallow errors and keep asking
until the task has finished.
"""

from __future__ import annotations

import asyncio

from server.api.bridge import wait_finished
from server.logger import get_logger

log = get_logger("api")
RETRY_S = 0.2  # between repeated stop requests
GIVE_UP_S = 60.0  # a background reaper stops asking after this long
_reapers: set[asyncio.Task] = set()  # strong references to running reapers


def stop_tasks(tasks) -> None:
    """Ask every unfinished task to stop; never raises."""
    for task in tasks:
        if task.is_finished:
            continue
        try:
            task.stop()
        except Exception as e:  # the scheduler moved it mid-request: the next try lands
            log.debug(f"stop request for {task.task_id} failed, retrying: {e!r}")


async def stop_and_wait(task, limit: float = 30.0) -> bool:
    """Stop ``task`` and wait until it has finished, repeating the request meanwhile.

    Returns False (and logs) if it is still running after ``limit`` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not task.is_finished:
        if loop.time() > deadline:
            log.warning(f"{task.task_id} did not stop within {limit:.0f}s")
            return False
        stop_tasks([task])
        try:
            await asyncio.wait_for(wait_finished(task, poll=RETRY_S), RETRY_S * 2)
        except asyncio.TimeoutError:
            pass
    return True


async def _reap(tasks) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GIVE_UP_S
    while any(not t.is_finished for t in tasks) and loop.time() < deadline:
        stop_tasks(tasks)
        await asyncio.sleep(RETRY_S)


def stop_in_background(tasks) -> None:
    """Stop ``tasks`` now and keep asking from a background coroutine until they finish.

    For clean-up code that cannot wait (a cancelled stream); needs a running event loop.
    """
    tasks = [t for t in tasks if not t.is_finished]
    stop_tasks(tasks)
    if not tasks:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # finalised outside the loop: the one request above must do
        return
    reaper = loop.create_task(_reap(tasks))
    _reapers.add(reaper)
    reaper.add_done_callback(_reapers.discard)


class Drain:
    """Set once the server is asked to shut down (``run.py``'s uvicorn server calls ``begin``
    from its signal handler). Streams end on sse-starlette's own shutdown signal; plain
    (non-stream) OpenAI requests wait on this one: they stop their tasks and answer with the
    text so far, as a stream ends, instead of generating on until uvicorn's graceful-shutdown
    limit cancels them (a bare 500 and a traceback). Requests that come after it are refused
    (503)."""

    def __init__(self):
        self.event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the app serves on (its lifespan's): ``begin`` wakes it from any thread."""
        self._loop = loop

    def begin(self) -> None:
        """Any thread, or a signal handler: start draining (once the app is serving)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.event.set)

    @property
    def draining(self) -> bool:
        return self.event.is_set()

    async def stop_when_draining(self, tasks) -> None:
        """Stop ``tasks`` (in the background, until they finish) once draining begins."""
        await self.event.wait()
        stop_in_background(tasks)
