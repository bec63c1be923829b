"""Prompt scoring: each token's log probability after the tokens before it (the OpenAI
completions' ``echo`` with ``logprobs``), computed on the scheduler's thread between its steps.

``BaseScheduler.score(tokens, top)`` queues a ``ScoreJob`` and returns a
``concurrent.futures.Future``; each scheduler step runs one pass of one job
(``prefill_chunk`` tokens, from a scratch state of its own: the prefix cache is neither read nor
written, and no slot is taken), so decoding streams go on between its passes; jobs take
turns, a pass each (a short prompt waits for one pass of each job ahead, not for all of a long
one), at most ``SCORE_LIVE`` of them part way through at once. The result is one
``server.scheduler.logprobs`` entry per token but the first (which follows nothing). A job that
fails fails alone (its future's exception); one whose future is cancelled (its client left) is
dropped at its next pass; a shutdown fails those not done.
"""

from __future__ import annotations

import concurrent.futures
from concurrent.futures import InvalidStateError

from server.scheduler.logprobs import TOP_MAX, Entry, to_entries


class ScoringStopped(RuntimeError):
    """The scheduler shut down before the job was done (or was shutting down when asked)."""


class ScoreJob:
    def __init__(self, tokens: list[int], top: int):
        if not tokens:
            raise ValueError("scoring needs at least one token")
        if not 0 <= top <= TOP_MAX:
            raise ValueError(f"top must be 0-{TOP_MAX}, not {top}")
        self.tokens, self.top = list(tokens), top
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.pos = 0  # tokens passed through the model so far
        self.state = None
        self.entries: list[Entry] = []

    @property
    def started(self) -> bool:
        """Part way through: a state held between passes."""
        return self.state is not None

    @property
    def left(self) -> int:
        return len(self.tokens) - self.pos

    def step(self, model, chunk: int) -> bool:
        """One pass of up to ``chunk`` tokens; True once the job is over (all passed, or its
        future cancelled): then ``finish`` sets the result (the scheduler first takes the job
        off its queue, so a caller woken by the result finds the job's place free)."""
        if self.future.cancelled():
            self.state = None
            return True
        if self.state is None:
            self.state = model.new_state(1)
        end = min(self.pos + chunk, len(self.tokens))
        chosen, vals, ids = model.score(self.tokens[self.pos:end],
                                        self.tokens[self.pos + 1:end + 1], self.state, self.top)
        chosen = chosen.cpu().tolist()
        if self.top:
            vals, ids = vals.cpu().tolist(), ids.cpu().tolist()
        self.entries += to_entries(chosen, ids, vals, range(len(chosen)), self.top, self.top)
        self.pos = end
        return end >= len(self.tokens)

    def finish(self) -> None:
        self.state = None
        try:
            self.future.set_result(self.entries)
        except InvalidStateError:  # cancelled, or failed by a shutdown, meanwhile
            pass

    def fail(self, error: BaseException) -> None:
        self.state = None
        try:
            self.future.set_exception(error)
        except InvalidStateError:  # done or cancelled already
            pass
