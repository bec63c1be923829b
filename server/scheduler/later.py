"""Work the prefiller does after a step's pulse, for later requests: turn boundaries passed by a
batched round (``_keep_later``, ``run_later``), and next-turn prefixes (``queue_warm``).

**later**: a round of several tasks (one batched pass) that passes a chat's first or last turn
boundary (``_Seq.later``) keeps a copy of the state each task started from; after a step's
pulse, once the task is past its prefill (its first token out), ``run_later`` computes the
boundary states from that copy in passes of their own and stores them (at most ``LATER_MAX``
such jobs wait: the prefiller stops a feed at its first boundary instead of adding one more;
in a pass whose states are not kept, where such a stop would keep nothing, the boundaries past
the room are lost).

**next turn** (``queue_warm``): when a chat reply is complete, the API renders the history as
the client will re-send it (the reply without its reasoning, then the turn separator) and queues
its tokens; ``run_later`` feeds them from their longest cached prefix (the boundary before the
reply) and stores the state, so the next turn prefills only its new message. The serving
scheduler runs such a job ``WARM_DELAY_S`` after it was queued: a client that sends its next
turn at once (a program) would otherwise find the device busy with the job's pass and wait for
it (measured on the H200: a whole-prompt hit took 4.3-6.3 ms to its first token, the job's
pass ahead of it). A request that arrives before the job ran drops it (``_drop_warm_for``,
from the prefiller's lookup) and feeds those tokens itself, in its own pass: one call instead
of two.

``LaterWork`` is the ``Prefiller``'s base: it uses the prefiller's ``engine``, ``cache``,
``align`` and hashing helpers.
"""

from __future__ import annotations

import time
from array import array
from collections import deque
from dataclasses import dataclass

from server.logger import get_logger
from server.scheduler.prefix_cache import prefix_hashes
from server.task.cache_origin import origin_base
from server.task.task import Status

LATER_MAX = 4  # boundary states waiting to be computed after the pulse (each holds one state)
WARM_MAX = 8  # next-turn prefixes waiting (token lists only; the oldest dropped beyond)
WARM_TOKENS = 2048  # the longest feed a next-turn prefix may take from its cached start
WARM_DELAY_S = 0.05  # a serving scheduler's next-turn prefix waits this long after its reply
log = get_logger(__name__)


@dataclass(eq=False)
class _Later:
    """Checkpoints to compute after the pulse: ``tokens[start:stop]`` fed into ``state`` (a copy
    of the sequence's state after ``tokens[:start]``) for each of ``stops`` in turn, once
    ``task`` is past the prefill of ``tokens`` (``waits``)."""

    origin: str
    hashes: array
    tokens: array
    start: int
    stops: list[int]  # ascending; the state after each is stored
    state: object
    task: object

    @property
    def waits(self) -> bool:
        """Its task is still feeding ``tokens`` (all but the last are fed at the end). Not the
        status alone: a task finished and given a new prompt but not resubmitted is PREFILL
        too, and its job would wait forever (and keep the scheduler stepping) — also when it
        had stopped (or failed) short of ``tokens``' end, so only a task a scheduler holds
        (``Task.held``) is waited for."""
        task = self.task
        return (task.status == Status.PREFILL and task.held
                and len(task.history) < len(self.tokens) - 1)


class LaterWork:
    """The prefiller's deferred jobs: boundary states and next-turn prefixes (module docstring)."""

    def __init__(self):
        self._later: deque[_Later] = deque(maxlen=LATER_MAX)
        self.later_tokens = 0  # tokens run through the model by run_later (computed twice)
        # (origin, tokens, due: time.monotonic() from which run_later may compute it)
        self._warm: deque[tuple[str, array, float]] = deque(maxlen=WARM_MAX)
        self.warm_tokens = 0  # tokens run through the model for next-turn prefixes
        self.warm_dropped = 0  # next-turn prefixes whose request came first and fed them

    def _keep_later(self, plan) -> None:
        """Before a round: for each task whose feed passes one of its ``later`` points, keep a
        copy of its state now (the start of the later pass)."""
        for slot, task, s, n in plan:
            h = len(task.history)
            passed = s.later_between(h, h + n) if s is not None and s.canonical else []
            if passed:
                for p in passed:
                    s.later.remove(p)
                if len(self._later) >= LATER_MAX:  # (a round that may not stop for want of
                    continue  # room: those points are lost, not a waiting job)
                state = self.engine.state.select([slot])
                self._later.append(_Later(s.origin, s.hashes, s.tokens, h, sorted(passed), state,
                                          task))

    @property
    def has_later(self) -> bool:
        return bool(self._later) or self.warm_wait() == 0.0

    def warm_wait(self) -> float | None:
        """Seconds until a queued next-turn prefix is due (0.0: one is); None: none queued.
        Any thread: the queue is read through a copy made in one step (``tuple``): other
        threads append to it (``queue_warm``) and the scheduler thread removes from it, and a
        deque changed while a Python loop walks it raises."""
        jobs = tuple(self._warm)
        if not jobs:
            return None
        return max(0.0, min(due for *_, due in jobs) - time.monotonic())

    def queue_warm(self, origin: str, tokens, delay: float = 0.0) -> None:
        """A prefix a request is expected to start with (the next turn of a chat: its history,
        the reply as the client re-sends it): computed from its longest cached prefix and stored
        by ``run_later`` from ``delay`` s on, when the scheduler has time; a request that starts
        with it before then feeds those tokens itself (``_jump``). The caller holds the
        scheduler's lock."""
        if self.caching and len(tokens) >= self.cache.min_tokens:
            self._warm.append((origin, array("I", tokens), time.monotonic() + delay))

    def run_later(self, warm: bool = True) -> None:
        """Compute and store one waiting checkpoint (the scheduler calls it after the pulse) whose
        task is past its prefill: a job never delays its own task's first token (a prompt fed
        over several steps passes its boundary before its last step); else, if ``warm`` (no
        request waits for a slot), one next-turn prefix (``queue_warm``)."""
        job = next((j for j in self._later if not j.waits), None)
        if job is None:
            now = time.monotonic()
            due = next((w for w in tuple(self._warm) if w[2] <= now), None) if warm else None
            if due is not None:
                try:
                    self._warm.remove(due)
                except ValueError:  # dropped meanwhile (a full queue loses its oldest)
                    return
                self._run_warm(*due[:2])
            return
        self._later.remove(job)
        keys = [(p, self.cache.key(job.origin, job.hashes, p)) for p in job.stops]
        keys = [(p, key) for p, key in keys if not self.cache.contains(key)]
        if not self.cache.enabled or not keys:
            return
        pos = job.start
        for i, (stop, key) in enumerate(keys):
            self.engine.model.prefill([job.tokens[pos:stop].tolist()], job.state, logits=False)
            self.later_tokens += stop - pos
            pos = stop
            last = i == len(keys) - 1  # the cache owns what it is given: a copy but the last
            self.cache.insert(key, job.tokens[:stop], job.state if last else job.state.clone())

    def _run_warm(self, origin: str, tokens: array) -> None:
        """Store the state after ``tokens``, fed from their longest cached prefix (none: not
        computed, nor when more than WARM_TOKENS or a step's prefill budget would be fed). It
        serves no task in hand: a fault drops the waiting next-turn prefixes (logged) and
        reaches no task."""
        try:
            self._warm_one(origin, tokens)
        except Exception as e:
            self._warm.clear()
            log.error(f"Computing a next-turn prefix state failed (dropped): {e!r}")

    def _warm_one(self, origin: str, tokens: array) -> None:
        if not self.cache.enabled:
            return
        base = origin_base(origin)
        n_all = len(tokens) - (len(tokens) - base) % self.align  # (the next turn feeds the rest)
        hashes = prefix_hashes(tokens, self._known_hashes(self._shares(tokens)))
        key = self.cache.key(origin, hashes, n_all)
        found = None if self.cache.contains(key) else self.cache.lookup(
            origin, hashes, tokens, 0, n_all - 1, align=self.align, base=base)
        # at most a step's prefill budget too: the pass runs between two pulses, and a longer
        # one held every decoding stream past the wait the budget bounds (2,048 tokens against
        # the CPU's 512); the next turn feeds such a prefix itself, in steps of the budget
        if found is None or n_all - found[0] > min(WARM_TOKENS, self._step_budget):
            return
        n, cached = found[0], found[1]
        state = cached.to(device=self.engine.device)  # a host-tier entry comes to the device
        if state is cached:
            state = cached.clone()  # the cache's own tensors are never written
        self.engine.model.prefill([tokens[n:n_all].tolist()], state, logits=False)
        self.warm_tokens += n_all - n
        self.cache.insert(key, tokens[:n_all], state)

    def _drop_warm_for(self, s) -> None:
        """Drop the queued next-turn prefixes that ``s`` starts with (its request came before
        they ran): its own pass feeds those tokens, one call instead of two."""
        for job in list(self._warm):
            origin, tokens, _ = job
            if origin == s.origin and len(tokens) < len(s.tokens) and \
                    s.tokens[:len(tokens)] == tokens:
                try:
                    self._warm.remove(job)
                except ValueError:  # dropped meanwhile (a full queue loses its oldest)
                    continue
                self.warm_dropped += 1

    def drop_later(self) -> None:
        self._later.clear()
        self._warm.clear()
