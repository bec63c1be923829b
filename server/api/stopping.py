"""Stopping tasks from handlers reliably: requests that never raise, repeated until they land.

``Task.stop()`` is called from the event loop while the scheduler thread moves tasks between the
queue, prefill and decoding slots. A request that arrives in the wrong moment can be missed (or
the hook can raise), so clean-up paths use these helpers: they swallow errors and keep asking
until the task has finished.
"""

from __future__ import annotations

import asyncio
import weakref

import anyio
from fastapi import HTTPException

from server.api.bridge import wait_finished
from server.logger import get_logger

log = get_logger("api")
RETRY_S = 0.2  # between repeated stop requests
GIVE_UP_S = 60.0  # a background reaper stops asking after this long
_reapers: set[asyncio.Task] = set()  # strong references to running reapers
RETRY_AFTER_S = "1"  # the Retry-After of a 503 for work the server cannot take now


class ShuttingDown(HTTPException):
    """503 with Retry-After: the server is shutting down (new work refused, a request's body
    still arriving, a new task's prefill stopped). ``code``: the OpenAI routes' error code.
    FastAPI's HTTPException: a route's body parsing passes it on (any other exception there
    becomes a 400)."""
    code = "server_shutting_down"

    def __init__(self):
        super().__init__(503, "The server is shutting down; retry shortly",
                         headers={"Retry-After": RETRY_AFTER_S})


async def client_gone(request) -> None:
    """Return once the client of ``request`` has closed the connection (checked every
    0.25 s)."""
    while not await request.is_disconnected():
        await asyncio.sleep(0.25)


async def finish_watched(task, drain, request=None) -> bool:
    """Wait for ``task`` to finish, stopping it once the server begins to shut down
    (``drain``, the app's ``Drain``; None: not watched) or once the client of ``request``
    leaves (None: not watched); True if the client left first."""
    async def stop_when_gone() -> None:
        await client_gone(request)
        stop_in_background([task])

    watchers = [] if drain is None else [asyncio.create_task(drain.stop_when_draining([task]))]
    if request is not None:
        watchers.append(gone := asyncio.create_task(stop_when_gone()))
    try:
        await wait_finished(task)
    finally:
        left = request is not None and gone.done()  # (its client went first)
        for w in watchers:
            w.cancel()
    return left


def stop_tasks(tasks) -> None:
    """Ask every unfinished task to stop; never raises."""
    for task in tasks:
        if task.is_finished:
            continue
        try:
            task.stop()
        except Exception as e:  # the scheduler moved it mid-request: the next try lands
            log.debug(f"stop request for {task.task_id} failed, retrying: {e!r}")


async def _stop_until(task, over, limit: float) -> bool:
    """Ask ``task`` to stop, again every ``RETRY_S`` (a request can be missed), until
    ``over()``; False if it is still not after ``limit`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not over():
        if loop.time() > deadline:
            return False
        stop_tasks([task])  # (no await since the check: no continue began a round between)
        try:
            await asyncio.wait_for(wait_finished(task, poll=RETRY_S), RETRY_S * 2)
        except asyncio.TimeoutError:
            pass
    return True


async def stop_and_wait(task, limit: float = 30.0) -> bool:
    """Stop ``task`` and wait until it has finished, repeating the request meanwhile.

    Returns False (and logs) if it is still running after ``limit`` seconds.
    """
    if await _stop_until(task, lambda: task.is_finished, limit):
        return True
    log.warning(f"{task.task_id} did not stop within {limit:.0f}s")
    return False


async def stop_round(task, limit: float) -> bool:
    """Stop the round ``task`` runs and return once it is over: the task finished, or another
    request began its next round (which is not stopped: seen at the next check). The request
    is repeated meanwhile; False if the round still runs after ``limit`` seconds."""
    this_round = task.round_output()
    return await _stop_until(task, lambda: task.tokens_of_round(this_round, len(this_round))[1],
                             limit)


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
    from its signal handler). Every reply with tasks running then stops them through ``stop``
    (``stop_when_draining``): plain OpenAI requests, OpenAI streams and Task API streams. The
    Drain marks each task it stops, so that the reply can say it was cut short by the shutdown
    (``cut_short``: OpenAI streams end with an error event, plain requests get a 503 to retry,
    Task API streams an error event before ``[DONE]``) instead of looking complete. A task
    already asked to stop (a client's ``/stop``, a stop string, a client that left) is not
    marked: its reply ends as any stopped one. Requests that come after ``begin`` are refused
    (503)."""

    def __init__(self):
        self.event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        # task -> the round (``Task.round_output``) the shutdown stopped; weak: never keeps one
        self._cut: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

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

    def stop(self, tasks) -> None:
        """Stop ``tasks`` for the shutdown (in the background, until they finish), marking
        those that were running and not asked to stop already."""
        for task in tasks:
            if not task.is_finished and not task.stop_requested:
                self._cut[task] = task.round_output()
        stop_in_background(tasks)

    def cut_short(self, task) -> bool:
        """Whether ``task``'s round ended because the shutdown stopped it (``stop``): it
        finished "abort" in the round that was marked (it did not end first on its own)."""
        return (task.finish_reason == "abort" and task.is_finished
                and self._cut.get(task) is task.round_output())

    async def stop_when_draining(self, tasks, also: anyio.Event | None = None) -> None:
        """``stop`` the tasks once draining begins, or once ``also`` is set (sse-starlette's
        own shutdown signal: the server is stopping without having called ``begin``).
        ``tasks``: a list, or a function giving those made by then (a stream that starts
        before its tasks exist)."""
        waits = [asyncio.ensure_future(self.event.wait())]
        if also is not None:
            waits.append(asyncio.ensure_future(also.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        self.stop(tasks() if callable(tasks) else tasks)
