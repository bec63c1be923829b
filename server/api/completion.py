"""Running OpenAI choices: temporary tasks, each followed through an ``OutputSplitter``.

One ``Choice`` per returned choice: its task (``TMP_…``, state not kept), its splitter and, at the
end, its finish reason. ``run_choices`` follows all of a request's tasks at once and yields
``(choice, piece)`` as text arrives, ``(choice, None)`` when a choice is over. When a splitter
matches a stop string or the turn boundary, the task is stopped and the choice ends there. When
the consumer goes away (client disconnect: the generator is cancelled or closed), every task that
is still running is stopped. A choice whose task the server's shutdown stopped (``Drain``) is
``cut_short``: its reply is incomplete, and the route says so instead of a ``finish_reason``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

from server.api.bridge import follow
from server.api.splitter import OutputSplitter, Piece
from server.api.stopping import stop_and_wait, stop_in_background, stop_tasks
from server.logger import get_logger
from server.model.tokenizer import IncrementalDecoder
from server.task.task import Task, new_task_id

SEED_MOD = 1 << 62  # seeds stay in the sampler's int64 range
log = get_logger(__name__)


@dataclass
class Choice:
    index: int
    task: Task
    splitter: OutputSplitter
    echo: str = ""  # /v1/completions echo: the prompt text, sent first
    lead: bytes = b""  # the echoed prompt's incomplete last character, which the reply's
    # first tokens complete (token-id prompts: ``incomplete_tail``)
    pieces: list[Piece] = field(default_factory=list)  # everything emitted
    finish_reason: str | None = None  # "stop" | "length" | "tool_calls" (None while running)
    error: str | None = None  # the task failed
    on_finish: Callable[[Choice], Awaitable[None]] | None = None  # awaited once it ended
    # without an error, before its end is sent
    stop_tokens: int | None = None  # a stop string or the turn boundary ended it: the tokens
    # up to the match's end
    cut_short: bool = False  # the server's shutdown stopped its task (``Drain.cut_short``)
    fed: int = 0  # tokens whose text went to the splitter
    sent_logprobs: int = 0  # tokens whose log probabilities ``take_logprobs`` gave out
    tail_logprobs: list = field(default_factory=list)  # those no piece took (held text the
    # end dropped, or a stop string's tokens after its last piece): they go with the end
    echo_logprobs: list | None = None  # the echoed prompt's (token, entry) pairs (the first
    # entry None), when they were asked for

    @property
    def completion_tokens(self) -> int:
        """Tokens generated, up to the end of the stop string when one ended the choice (as
        OpenAI counts): the task generates a few more before it stops (the rest of its pulse),
        which counted made the figure differ between a streamed and a plain request."""
        if self.stop_tokens is not None:
            return self.stop_tokens
        return len(self.task.round_tokens())

    def all_logprobs(self) -> list[tuple[int, tuple]]:
        """Every ``(token, entry)`` of a choice that is over, in order (each piece's, then
        the tail's)."""
        return [p for piece in self.pieces for p in piece.logprobs] + self.tail_logprobs

    def take_logprobs(self) -> list[tuple[int, tuple]]:
        """``(token, entry)`` (``Task.output_logprobs``) for the tokens whose text reached the
        splitter since the last call, never past a stop string's end: once the choice is over,
        all the tokens ``completion_tokens`` counts have been given, each once. Empty when the
        task asked for none."""
        task = self.task
        if task.logprobs is None:
            return []
        end = self.fed if self.stop_tokens is None else min(self.fed, self.stop_tokens)
        start, self.sent_logprobs = self.sent_logprobs, max(self.sent_logprobs, end)
        return list(zip(task.output[start:end], task.output_logprobs[start:end]))


def tokens_through(tokenizer, tokens: list[int], chars: int, lead: bytes = b"") -> int:
    """How many of ``tokens`` it takes for their text (decoded as ``follow`` decodes it, after
    ``lead``) to reach ``chars`` characters (all of them if it never does)."""
    decoder, n = IncrementalDecoder(tokenizer, lead), 0
    for i, t in enumerate(tokens):
        n += len(decoder.feed(t))
        if n >= chars:
            return i + 1
    return len(tokens)


def make_tasks(prompt: list[int], n: int, params: dict, seed: int | None,
               stop_at_turn: bool = True, logprobs: int | None = None,
               logit_bias: dict[int, float] | None = None) -> list[Task]:
    """``n`` temporary tasks for one prompt (token ids: ints, from the tokenizer or a validated
    request); with a seed, task ``i`` gets ``seed + i``; ``stop_at_turn``, ``logprobs``,
    ``logit_bias``: ``Task``'s."""
    tasks = []
    for i in range(n):
        s = None if seed is None else (seed + i) % SEED_MOD
        task = Task(task_id=new_task_id("TMP"), seed=s, **params)
        # what Task(prompt) does, without its int() of every id (~0.1 ms for 2,000 on a slow CPU)
        task.pending = list(prompt)
        task.keep_state = False  # nothing reads a temporary task's state afterwards
        task.stop_at_turn = stop_at_turn
        task.logprobs = logprobs
        task.logit_bias = logit_bias
        tasks.append(task)
    return tasks


def submit(scheduler, tasks: list[Task]) -> None:
    """Enqueue all ``tasks``; if the queue fills midway, stop the ones already queued and re-raise.
    Room for all of them is checked first: a request refused at its second choice held a queue
    place with its first until that one was stopped (another request could be refused for it),
    and its 503 counted its own first choice as a waiting task (session 35's QA)."""
    scheduler.check_room(len(tasks))  # (the room stays: no other add_task on the event loop)
    added = []
    try:
        for task in tasks:
            scheduler.add_task(task)
            added.append(task)
    except Exception:
        stop_tasks(added)
        raise


def final_reason(choice: Choice) -> str:
    """OpenAI's finish_reason for a choice whose task and splitter are done."""
    if choice.splitter.stopped:
        reason = "stop"
    else:
        reason = "length" if choice.task.finish_reason == "length" else "stop"
    if choice.splitter.tool_calls and reason != "length":
        return "tool_calls"
    return reason


async def _pieces(choice: Choice, tokenizer, drain=None) -> AsyncIterator[Piece]:
    """Follow one choice's task through its splitter, yielding each piece; at the end set its
    ``finish_reason`` (and ``cut_short``: ``drain``, a ``stopping.Drain``, stopped its task) and
    await its ``on_finish``. A failure becomes ``choice.error``."""
    task, splitter = choice.task, choice.splitter
    carry = []  # log probabilities of tokens whose text no piece has sent yet
    try:
        async with aclosing(follow(task, tokenizer, lead=choice.lead)) as chunks:
            async for chunk in chunks:
                pieces = splitter.feed(chunk.text)
                if chunk.finished:
                    pieces += splitter.finish(task.finish_reason, task.ended_at_turn)
                choice.fed += chunk.tokens
                if splitter.stopped:  # (before the pieces go out: their log probabilities
                    # stop at the stop string's end)
                    choice.stop_tokens = tokens_through(tokenizer, task.round_tokens(),
                                                        splitter.stopped_at, choice.lead)
                # the chunk's tokens' log probabilities go with its first piece, here (a
                # slow reader takes the pieces later, when more tokens have been fed)
                carry += choice.take_logprobs()
                if pieces and carry:
                    pieces[0].logprobs, carry = carry, []
                for piece in pieces:
                    choice.pieces.append(piece)
                    yield piece
                if splitter.stopped:
                    break  # a stop string or the turn boundary: the rest is never sent
        choice.tail_logprobs = carry
        if splitter.stopped:
            await stop_and_wait(task)
        if task.finish_reason == "error":
            choice.error = task.error or "generation failed"
        choice.cut_short = (drain is not None and not splitter.stopped
                            and drain.cut_short(task))
    except Exception as e:  # reported to the client, never a hung stream
        choice.error = f"{type(e).__name__}: {e}"
        stop_in_background([task])
    choice.finish_reason = final_reason(choice)
    if choice.on_finish is not None and choice.error is None:
        try:  # before the choice's end is sent: a client's next request comes after it
            await choice.on_finish(choice)
        except Exception as e:  # an optimisation hook never fails the reply
            log.warning(f"on_finish of choice {choice.index} failed: {e!r}")


async def _produce(choice: Choice, tokenizer, queue: asyncio.Queue, drain=None) -> None:
    """Put ``(choice, piece)`` for each piece, then ``(choice, None)``."""
    async with aclosing(_pieces(choice, tokenizer, drain)) as pieces:
        async for piece in pieces:
            await queue.put((choice, piece))
    await queue.put((choice, None))


async def run_choices(choices: list[Choice], tokenizer,
                      drain=None) -> AsyncIterator[tuple[Choice, Piece | None]]:
    """Follow every choice's task concurrently; see the module docstring. Each choice is read
    by a task of its own, also when the consumer is slow to take the pieces (a client reading
    slowly): a stop string still stops the generation when it is produced. ``drain``: the
    app's ``stopping.Drain``, which tells the choices it cut short (``Choice.cut_short``)."""
    queue: asyncio.Queue = asyncio.Queue()
    producers = [asyncio.create_task(_produce(c, tokenizer, queue, drain)) for c in choices]
    open_choices = len(choices)
    try:
        while open_choices:
            choice, piece = await queue.get()
            if piece is None:
                open_choices -= 1
            yield choice, piece
    finally:
        stop_in_background([c.task for c in choices])
        for p in producers:
            p.cancel()


def cut_message(choices: list[Choice]) -> str | None:
    """What an OpenAI reply says when the server's shutdown cut any of its choices short (None
    when none was): the tokens it had, and that a retry is the way to a whole reply."""
    if not any(c.cut_short for c in choices):
        return None
    tokens = sum(c.completion_tokens for c in choices)
    return (f"The server is shutting down: this reply was cut short after {tokens} tokens; "
            "retry it")


def usage(prompt_tokens: int, choices: list[Choice]) -> dict:
    completion = sum(c.completion_tokens for c in choices)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion}
