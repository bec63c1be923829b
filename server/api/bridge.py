"""The hand-over between the scheduler thread and asyncio handlers.

Handlers never block the event loop and never touch tensors: they subscribe to a task, and the
scheduler thread wakes them with ``loop.call_soon_threadsafe`` after each pulse and at the end.
Any number of readers may follow one task, each from its own token offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from server.model.tokenizer import IncrementalDecoder, incomplete_tail
from server.task.task import LEAD_TOKENS, Task


def round_lead(tokenizer, before: list[int], round_out: list[int], pos: int = 0) -> bytes:
    """The incomplete character the text of a Task API round from its token ``pos`` goes on
    from: the end of ``before`` (``Task.round_lead``: the sequence before the round) and of
    the round's tokens before ``pos`` (``round_out``). The rounds are pieces of one document: a
    ``continue`` completing a character the last round ended inside started with U+FFFD
    (session 42's QA). Decoded with ``shown=True``: only a round that completes it shows it."""
    return incomplete_tail(tokenizer.decode_bytes((before + round_out[:pos])[-LEAD_TOKENS:]))


@dataclass
class Chunk:
    text: str  # decoded text (never half a UTF-8 character)
    tokens: int  # tokens this chunk covers
    seconds: float  # since the previous chunk (or since the reader started)
    finished: bool  # True on the last chunk


class _Waker:
    """Subscribe to a task; ``await wait()`` returns after the task changes.

    The scheduler thread's wake-up resolves the future the reader awaits, so the reader runs
    on the loop's next iteration (``asyncio.wait_for`` on an ``Event`` took four: it wraps the
    wait in a task of its own). A change while nobody waits makes the next ``wait`` return at
    once."""

    def __init__(self, task: Task):
        self.task = task
        self.loop = asyncio.get_running_loop()
        self._future: asyncio.Future | None = None
        self._changed = False
        task.subscribe(self._on_change)

    def _on_change(self, _task: Task) -> None:  # scheduler thread
        self.loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)
        else:
            self._changed = True

    async def wait(self, timeout: float | None = None) -> None:
        if not self._changed:
            self._future = future = self.loop.create_future()
            timer = None if timeout is None else self.loop.call_later(timeout, _resolve, future)
            try:
                await future
            finally:
                self._future = None
                if timer is not None:
                    timer.cancel()
        self._changed = False

    def close(self) -> None:
        self.task.unsubscribe(self._on_change)


UNDER_WAY_WAIT_S = 0.02  # the longest a stream's start waits for its task's first pass


class UnderWay:
    """Made before a task is submitted; ``await wait()`` returns once its scheduler has it under
    way (``Task.under_way_callback``: on CUDA its first pass queued on the device; at once on
    the CPU), the task ended, or ``limit`` s passed (a busy scheduler admits it later).

    Why: building and starting a streamed response is ~0.5-1 ms of Python on the event loop.
    Right after ``add_task`` it holds the GIL while the scheduler thread, just woken, prepares
    the prompt's pass (cache lookup, hashes, the launch): measured on the GPU machine, the
    scheduler woke ~1 ms after ``add_task`` over HTTP against ~0.6 ms in process. Done after
    the launch, that Python runs while the device computes the pass."""

    def __init__(self, task: Task):
        self.loop = asyncio.get_running_loop()
        self.future = self.loop.create_future()
        task.under_way_callback = self._fire

    def _fire(self, _task: Task) -> None:  # the scheduler thread (or add_task's caller)
        self.loop.call_soon_threadsafe(_resolve, self.future)

    async def wait(self, limit: float = UNDER_WAY_WAIT_S) -> None:
        timer = self.loop.call_later(limit, _resolve, self.future)
        try:
            await self.future
        finally:
            timer.cancel()


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


async def follow(task: Task, tokenizer, pos: int = 0, poll: float = 1.0,
                 lead: bytes = b"", goes_on: bool = False) -> AsyncIterator[Chunk]:
    """Yield the task's output of its current round from token ``pos`` as it is generated,
    ending when the round ends (it finishes, or a ``continue`` begins the next one first);
    ``lead``: an incomplete character the output completes (``IncrementalDecoder``).
    ``goes_on`` (the Task API): the output goes on from the character the sequence before
    token ``pos`` ended inside, if it completes it (``round_lead``, read once the tokens
    before ``pos`` are there: a reader may ask for a ``pos`` not generated yet).

    The last chunk has ``finished=True`` (its text may be empty). ``poll`` bounds the wait between
    checks, so a reader never hangs on a missed wake-up.
    """
    loop = asyncio.get_running_loop()
    waker = _Waker(task)
    decoder = None if goes_on else IncrementalDecoder(tokenizer, lead)
    last = loop.time()
    this_round, before, start = task.round_output(), task.round_lead, pos  # (one round's: no
    try:  # await between them, and a continue sets both on this loop)
        while True:
            tokens, done = task.tokens_of_round(this_round, pos)
            if decoder is None and (tokens or done):
                decoder = IncrementalDecoder(
                    tokenizer, round_lead(tokenizer, before, this_round, start), shown=True)
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
