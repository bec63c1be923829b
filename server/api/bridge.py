"""The hand-over between the scheduler thread and asyncio handlers.

Handlers never block the event loop and never touch tensors: they subscribe to a task, and the
scheduler thread wakes them with ``loop.call_soon_threadsafe`` after each pulse and at the end.
Any number of readers may follow one task, each from its own token offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from server.model.tokenizer import IncrementalDecoder
from server.task.task import Task


@dataclass
class Chunk:
    text: str  # decoded text (never half a UTF-8 character)
    tokens: int  # tokens this chunk covers
    seconds: float  # since the previous chunk (or since the reader started)
    finished: bool  # True on the last chunk


class _Waker:
    """Subscribe to a task; ``await wait()`` returns after the task changes."""

    def __init__(self, task: Task):
        self.task = task
        self.loop = asyncio.get_running_loop()
        self.event = asyncio.Event()
        task.subscribe(self._on_change)

    def _on_change(self, _task: Task) -> None:
        self.loop.call_soon_threadsafe(self.event.set)

    async def wait(self, timeout: float | None = None) -> None:
        try:
            await asyncio.wait_for(self.event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        self.event.clear()

    def close(self) -> None:
        self.task.unsubscribe(self._on_change)


async def follow(task: Task, tokenizer, pos: int = 0, poll: float = 1.0) -> AsyncIterator[Chunk]:
    """Yield the task's output from token ``pos`` as it is generated, ending when it finishes.

    The last chunk has ``finished=True`` (its text may be empty). ``poll`` bounds the wait between
    checks, so a reader never hangs on a missed wake-up.
    """
    loop = asyncio.get_running_loop()
    waker = _Waker(task)
    decoder = IncrementalDecoder(tokenizer)
    last = loop.time()
    try:
        while True:
            done = task.is_finished  # read before the tokens: no token can be missed
            tokens = task.get_all_tokens()[pos:]
            if tokens or done:
                pos += len(tokens)
                text = decoder.feed(tokens) + (decoder.flush() if done else "")
                now = loop.time()
                yield Chunk(text, len(tokens), now - last, done)
                last = now
                if done:
                    return
            await waker.wait(poll)
    finally:
        waker.close()


async def wait_finished(task: Task, poll: float = 1.0) -> None:
    """Return once the task has finished, without blocking the event loop."""
    waker = _Waker(task)
    try:
        while not task.is_finished:
            await waker.wait(poll)
    finally:
        waker.close()
