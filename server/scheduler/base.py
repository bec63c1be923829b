"""BaseScheduler: self-enqueueing batched inference over a pool of slots.

Callers submit tasks from any thread (``new_task`` / ``add_task``) and walk away. One thread — the
daemon, or the caller of ``run()`` — owns the device and repeats ``step()``:

1. admit waiting tasks into free slots (subclasses choose the capacity: ``target_capacity``);
2. prefill up to ``prefill_chunk`` prompt tokens (by default 4,096 on CUDA, 512 on the CPU)
   across admitted tasks, batched (``Prefiller``; with a ``PrefixCache``, cached prefixes are
   loaded instead of computed);
3. start decoding the tasks whose prompt is fully fed (``max_tokens=0`` tasks finish here);
4. run one pulse of decode steps for all live slots and hand tokens to the tasks: ``buffer_size``
   steps, except right after tasks start, when pulses ramp up 1, 2, 4, … steps (``_pulse``),
   and never past the step at which every row has ended (``EndProbe``);
   then at most one checkpoint the prefiller put off (``run_later``: a chat turn's boundary
   state, wanted by the next turn, computed after this turn's first token; or the state after a
   finished reply as the next turn will re-send it, ``warm_prefix``);
5. finished tasks free their slot at once; tasks that keep their state finish once the copy-back
   thread has brought it home (CPU) — the batch does not wait; capacity is adjusted.

The scheduler keeps host bookkeeping only (which task sits in which slot); ``BatchEngine`` holds
every device tensor. This module holds the public surface and the thread; the phases of a step
(admission, prefill, pulses, release, resizing, faults) are ``SlotCycle`` (``cycle.py``).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import functools
import threading
import time
import weakref
from collections import deque

from server.logger import get_logger
from server.model.state import use_device
from server.scheduler.cycle import SlotCycle, finish_all
from server.scheduler.engine import BatchEngine
from server.scheduler.idle_trim import IdleTrim
from server.scheduler.later import WARM_DELAY_S
from server.scheduler.prefill import Prefiller
from server.scheduler.scoring import ScoreJob, ScoringStopped
from server.scheduler.stats import SchedulerStats
from server.task.policy import model_mismatch
from server.task.task import SCHEDULER_THREAD, Status, Task

STEP_WAIT_S = 120.0  # shutdown: how long past its timeout a running step is waited for
# prompt tokens a step feeds by default. The step's other tasks wait for that pass before their
# next pulse: on CUDA 4,096 tokens take ~80 ms at 2.9B; on the CPU (hundreds to a few thousand
# tokens a second) 512 keep that wait under a second or two, where 4,096 held streams for 5-15 s
# (the model cuts a pass into 256-token pieces there anyway; session 29's QA)
PREFILL_CHUNK = {"cuda": 4096, "cpu": 512}
SCORE_LIVE = 4  # prompts part way through their scoring at once (``_next_score``)
# decode steps a pulse runs at least once a task that fits has arrived (``admit_wait``): then it
# ends and the task is admitted, rather than waiting out a pulse of up to buffer_size steps
ADMIT_WAIT_STEPS = 4


def _shutdown_at_exit(ref) -> None:
    """(atexit) Stop a daemon still serving when the interpreter exits: left running, its thread
    was inside torch when Python finalized and the process aborted ("terminate called without an
    active exception", exit status 134) instead of ending as the script did (session 29's QA)."""
    sched = ref()
    if sched is not None and sched._daemon_alive:
        sched.shutdown()


class QueueFull(RuntimeError):
    """Raised by ``add_task`` when ``max_queue`` tasks already wait beyond the slots."""


class BaseScheduler(SlotCycle):
    log_name = "scheduler.base"

    def __init__(self, loader, max_batch_size: int = 256, buffer_size: int = 32,
                 prefill_chunk: int | None = None, max_queue: int = 1 << 30, prefix_cache=None):
        if prefill_chunk is None:  # (by device: PREFILL_CHUNK)
            prefill_chunk = PREFILL_CHUNK.get(loader.model.device.type, PREFILL_CHUNK["cpu"])
        for name, value, low in (("max_batch_size", max_batch_size, 1),
                                 ("buffer_size", buffer_size, 1),
                                 ("prefill_chunk", prefill_chunk, 1), ("max_queue", max_queue, 0)):
            # (0 steps a pulse or tokens a pass never got anywhere: run() spun forever)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name}={value!r} is invalid; expected an integer >= {low}")
        self.loader = loader
        self.max_batch_size = max_batch_size
        self.buffer_size = buffer_size
        self.prefill_chunk = prefill_chunk
        self.max_queue = max_queue
        self.log = get_logger(self.log_name)
        self.engine = BatchEngine(loader.model)
        self.engine.copyback.owner = self  # (its thread runs this scheduler's finish callbacks)
        self.sampler = self.engine.sampler
        # prompt feeding and the prefix state cache (``prefix_cache``: a PrefixCache or None)
        self.prefix_cache = prefix_cache
        self.prefiller = Prefiller(self.engine, prefix_cache, prefill_chunk)
        self.stats = SchedulerStats()
        self.slots: list[Task | None] = [None]  # host view of engine slots
        self.decoding: set[int] = set()  # slots that are live in the engine
        self.waiting: deque[Task] = deque()
        self._admitting = 0  # tasks taken off ``waiting`` by ``_admit``, not yet in ``slots``
        self._ramp = buffer_size  # steps of the next pulse (1 right after tasks start, see _pulse)
        # decode steps that must pass between two ramps while tasks decode (0: every start
        # ramps; a benchmark knob, ``stress --ramp-gap``: docs/performance.md, session 16)
        self.ramp_gap = 0
        self._since_ramp = 0  # decode steps since the pulses last ramped from 1
        # a task that arrives while others decode, and fits, waits at most this many decode
        # steps for the pulse to end and admit it (0: the whole pulse, up to buffer_size steps)
        self.admit_wait = ADMIT_WAIT_STEPS
        self._grow_failed: int | None = None  # the capacity a growth last failed to leave
        self._last_info = 0.0  # when a pulse line was last logged at INFO
        self._stops: list[Task] = []  # stop requests not yet applied to slots (any thread appends)
        self._scores: deque[ScoreJob] = deque()  # prompts to score (``score``), oldest first
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._at_exit = None  # the daemon's atexit hook while it serves (start_daemon)
        self._running = False
        # a shutdown() is under way until its _teardown ends (a start_daemon(), run() or second
        # shutdown() meanwhile waits for it); its stepping thread tears down when its step has
        # ended if it was called in a callback there (_teardown_due)
        self._stopping = False
        self._teardown_due = False
        self._busy = False  # True while step() has work in hand
        self._idle_trim = IdleTrim(self.engine.device)  # the daemon's: free memory back once idle
        self._stepper: threading.Thread | None = None  # the caller of run() stepping now
        # CUDA queues a pass and returns: the host goes on while the device works (_under_way)
        self._async_device = self.engine.device.type == "cuda"
        self.iteration = 0
        # per-pulse stats (bench/stress; ~340 bytes each: 100,000 held ~34 MB after an hour of
        # serving, session 29's review)
        self.pulses: deque[dict] = deque(maxlen=10_000)
        self.resizes: deque[dict] = deque(maxlen=10_000)
        self._resize(self.initial_capacity(), [])
        self.log.info(f"Init capacity = {self.capacity} (max={max_batch_size})")

    # ---- capacity policy (override in subclasses) ------------------------------------
    def initial_capacity(self) -> int:
        return self.max_batch_size

    def target_capacity(self, needed: int) -> int:
        return self.max_batch_size

    @property
    def capacity(self) -> int:
        return self.engine.capacity

    # ---- submitting --------------------------------------------------------------------
    def new_task(self, prompt: str | list[int], max_tokens: int = 50, temperature: float = 0.3,
                 top_p: float = 0.1, top_k: int = 20, presence_penalty: float = 0.0,
                 repetition_penalty: float = 0.0, penalty_decay: float = 0.0,
                 seed: int | None = 42, collect_callback=None, finish_callback=None,
                 task_id: str = "TMP", min_p: float = 0.0, logit_bias: dict | None = None,
                 constraint=None) -> Task:
        """Create a task for ``prompt`` (text or token ids) and enqueue it. ``logit_bias``
        (token id -> bias) and ``constraint`` (a ``server.task.constraint.Constraint``: the
        reply follows its grammar) are the first round's, set before the task is queued (a
        running daemon may admit it at once: set on the returned task, they could come too
        late). ``ValueError`` for an empty prompt (nothing to generate from), token ids
        outside the model's vocabulary or a parameter out of range (``Task.check_params``,
        ``check_logit_bias``) or a constraint or callback of the wrong type; ``TypeError`` for
        a prompt that is neither text nor token ids (bytes too: decode them first)."""
        try:
            if isinstance(prompt, (bytes, bytearray, memoryview)):  # (list() made token ids
                # of its bytes)
                raise TypeError
            tokens = self.loader.encode(prompt) if isinstance(prompt, str) else list(prompt)
        except TypeError:  # (None: "'NoneType' object is not iterable" named no argument)
            raise TypeError(f"prompt must be text or a list of token ids, not "
                            f"{type(prompt).__name__}") from None
        if not tokens:
            raise ValueError("empty prompt: a new task needs at least one token to start from")
        task = Task(tokens, task_id=task_id, max_tokens=max_tokens, temperature=temperature,
                    top_p=top_p, top_k=top_k, presence_penalty=presence_penalty,
                    repetition_penalty=repetition_penalty, penalty_decay=penalty_decay,
                    seed=seed, min_p=min_p, collect_callback=collect_callback,
                    finish_callback=finish_callback, tokenizer=self.loader)
        problem = model_mismatch(task, self.engine.model.cfg)
        if problem:
            raise ValueError(f"prompt of task {task_id}: {problem}")
        task.logit_bias, task.constraint = logit_bias, constraint
        self.add_task(task)
        return task

    @property
    def max_in_flight(self) -> int:
        """Tasks the scheduler takes at once: a slot each, then ``max_queue`` waiting."""
        return self.max_batch_size + self.max_queue

    def _queue_full(self, n: int) -> QueueFull | None:
        """(Holding ``_cv``) the refusal of ``n`` more tasks, or None: ``max_queue`` counts the
        tasks that would wait for a slot. Queued tasks wait for the scheduler's next step even
        with slots free, so a burst on an idle server counted whole against it (8 requests at
        ``max_queue`` 2 and 16 free slots: 5 refused; session 23's QA)."""
        busy = self.num_active + self._admitting
        waiting = len(self.waiting) + len(self._scores)  # (prompts to score wait too)
        if waiting + n + busy <= self.max_in_flight:
            return None
        return QueueFull(f"{waiting} tasks are waiting and {busy} slots of "
                         f"{self.max_batch_size} busy (max_queue={self.max_queue})")

    def check_room(self, n: int = 1) -> None:
        """Raise ``QueueFull`` unless ``n`` more tasks fit now. Only the scheduler thread takes
        tasks off the queue, so the room stays for a caller whose checks and ``add_task`` run
        with no other ``add_task`` between (the API's event loop)."""
        with self._cv:
            full = self._queue_full(n)
            if full is not None:
                raise full

    def add_task(self, task: Task) -> None:
        """Enqueue an existing task (new, forked or continued). Thread-safe. ``ValueError`` for
        a parameter out of range (``Task.check_params``, ``check_logit_bias``) and for a new
        task without a prompt (as ``new_task``); tokens that do not fit the model
        (``model_mismatch``) fail the task alone when it is admitted (``_admit``)."""
        if not isinstance(task, Task):  # (the spec's heading reads add_task(prompt, ...))
            raise TypeError(f"add_task takes a Task, not {type(task).__name__}: for a prompt, "
                            "scheduler.new_task(prompt, ...) makes the task and adds it")
        if task.status in (Status.RUNNING, Status.FINISHED):
            raise ValueError(f"task {task.task_id} is {task.status.name}; "
                             "call continue_gen() on a finished task first")
        why = task.sampling_problem(self.engine.model.cfg.vocab_size)
        if why is not None:
            raise ValueError(why)
        if (task.max_tokens > 0 and not task.can_generate and not task.history
                and task.state is None):  # a new task without a prompt ("finished" at once)
            raise ValueError(f"task {task.task_id} has no prompt: a new task needs at least "
                             "one token to generate from")
        if task.tokenizer is None:
            task.tokenizer = self.loader
        with self._cv:
            # held by a scheduler until it finishes (``Task.held``: this method sets the hook
            # that marks it, and tasks reach the queue and the slots only through here):
            # queued, in a slot, being admitted, or its state on its way home (copy-back) with
            # its status not yet FINISHED (a max_tokens=0 task is READY then): run again, it
            # would load a stale state and be marked FINISHED by the first round's finish
            with task._lock:  # (Task._finish changes both under it: finishing between the
                # check above and this one, a max_tokens=0 task was queued again, FINISHED)
                if task.status == Status.FINISHED:
                    raise ValueError(f"task {task.task_id} is FINISHED; call continue_gen() "
                                     "on a finished task first")
                if task.held:
                    raise ValueError(f"task {task.task_id} is already queued or in a slot "
                                     "(or finishing)")
                full = self._queue_full(1)
                if full is not None:
                    raise full
                task._stop_hook = self._on_stop
            # time to first token counts from here, or from its request's arrival
            task._t_queued = time.perf_counter() if task.arrived is None else task.arrived
            task.arrived = None
            self.waiting.append(task)
            self._cv.notify_all()
        if not self._async_device:
            task._under_way()  # its passes hold no GIL the caller's thread needs: go on now

    def score(self, tokens: list[int], top: int = 0) -> concurrent.futures.Future:
        """Any thread: each token's log probability after the ones before it, with ``top``
        alternatives (scoring.py): a future of one entry per token but the first, computed on
        the scheduler's thread a pass per step. ``ValueError`` for no tokens, ids outside the
        vocabulary or ``top`` outside 0-20; ``ScoringStopped`` while shutting down (the
        future's exception when a shutdown comes first); ``QueueFull`` as ``add_task`` (a job
        waits as a task does)."""
        job = ScoreJob(tokens, top)
        self._check_ids(job.tokens)  # (on the caller's thread, the event loop's: about half a
        # generator's time, docs/experiments/session45)
        with self._cv:
            if self._stopping:
                raise ScoringStopped("the scheduler is shutting down")
            full = self._queue_full(1)
            if full is not None:
                raise full
            self._scores.append(job)
            self._cv.notify_all()
        return job.future

    def _score_some(self) -> None:
        """Scheduler thread, once a step: one pass of the first job in turn that may run
        (``_next_score``), which then goes to the back unless done (jobs take turns a pass each:
        a short prompt does not wait for a long one's every pass); a fault fails that job
        alone."""
        with self._cv:  # (a shutdown may empty the queue on another thread)
            self._drop_cancelled_scores()
            job = self._next_score()
            if job is None:
                return
        error = None
        try:
            done = job.step(self.engine.model, self.prefill_chunk)
        except Exception as e:
            done, error = True, e
        with self._cv:
            try:
                self._scores.remove(job)
            except ValueError:  # (a shutdown emptied the queue meanwhile)
                pass
            else:
                if not done:
                    self._scores.append(job)
        if done:
            # (off the queue before its future resolves: the caller it wakes, which may queue
            # the request's tasks next, finds the job's place free)
            if error is None:
                job.finish()
            else:
                job.fail(error)

    def _drop_cancelled_scores(self) -> None:
        """(Holding ``_cv``) every job whose future was cancelled (its client left) off the
        queue, as stopped waiting tasks are each step. Dropped only when its turn came, one a
        step, each held a queue place meanwhile: a long one not yet started waited behind
        ``SCORE_LIVE`` jobs part way until one of them ended, and requests were refused for
        room there was."""
        for job in [j for j in self._scores if j.future.cancelled()]:
            self._scores.remove(job)
            job.state = None  # (a part-way job's one-row state)

    def _next_score(self) -> ScoreJob | None:
        """(Holding ``_cv``) the first job in turn that is part way through, fits in one pass,
        or may start: at most ``SCORE_LIVE`` jobs are part way through at once, each holding a
        one-row state between its passes (21 MB at 2.9B), however many long prompts wait."""
        live = sum(1 for j in self._scores if j.started)
        for job in self._scores:
            if job.started or live < SCORE_LIVE or job.left <= self.prefill_chunk:
                return job
        return None  # (an empty queue: with SCORE_LIVE jobs part way, one of them is found)

    def _fail_scores(self, why: str) -> None:
        with self._cv:
            jobs, self._scores = list(self._scores), deque()
        for job in jobs:
            job.fail(ScoringStopped(why))

    def _check_ids(self, tokens: list[int]) -> None:
        """``ValueError`` for token ids outside the loaded model's vocabulary (``score``,
        ``warm_prefix``)."""
        vocab = self.engine.model.cfg.vocab_size
        if tokens and not 0 <= min(tokens) <= max(tokens) < vocab:
            raise ValueError(f"token ids must be in 0..{vocab - 1}")

    def warm_prefix(self, origin: str, tokens: list[int]) -> None:
        """Any thread: cache the state after ``tokens`` (origin: ``Task.cache_origin``) when the
        scheduler has time: a prefix the next request of a conversation will start with
        (``Prefiller.queue_warm``). No-op without an enabled prefix cache. ``ValueError`` for
        ids outside the vocabulary (as ``score``): a chat reply re-encoded for the next turn can
        give ids a checkpoint with a smaller vocabulary lacks (a helper's review, session 61)."""
        self._check_ids(tokens)
        if not self.prefiller.caching:
            return
        with self._cv:
            # serving (the daemon): a client that sends its next turn at once finds the device
            # free (``WARM_DELAY_S``); run() by a caller computes it before returning
            self.prefiller.queue_warm(origin, tokens, WARM_DELAY_S if self._running else 0.0)
            self._cv.notify_all()

    def _on_stop(self, task: Task) -> None:
        """Any thread: note the request; the scheduler thread maps it to a slot before each step."""
        with self._cv:
            # only a decode pulse applies the list: stops of tasks that never decode (queued,
            # prefill-only) would pile up until one, each holding its task and state
            self._stops = [t for t in self._stops if not t.is_finished]
            self._stops.append(task)
            self._cv.notify_all()

    def _apply_stops(self) -> None:
        """Scheduler thread, before each decode step: flag the slots of tasks asked to stop.
        (Tasks not decoding yet, mid-prompt too, see ``task.stop_requested`` at the next step.)"""
        if not self._stops:
            return
        with self._cv:
            stops, self._stops = self._stops, []
        stops = [t for t in stops if t.stop_requested]  # a continued task's old stop is void
        for slot in self.decoding:
            if any(self.slots[slot] is t for t in stops):
                self.engine.request_stop(slot)

    # ---- the loop ------------------------------------------------------------------------
    @property
    def has_work(self) -> bool:
        """Tasks waiting, in slots, or finishing (their state on its way home)."""
        return self._has_slot_work or self.engine.copyback.busy

    @property
    def _has_slot_work(self) -> bool:
        """Something for ``step()``: tasks waiting or in slots, or a deferred checkpoint."""
        return (bool(self.waiting) or any(t is not None for t in self.slots)
                or self.prefiller.has_later or bool(self._scores))

    def _quiet(self) -> bool:
        """Nothing in flight beside the loop: no state on its way home, no next-turn prefix
        queued (the idle trim waits for them)."""
        return not self.engine.copyback.busy and self.prefiller.warm_wait() is None

    @property
    def num_active(self) -> int:
        return sum(t is not None for t in self.slots)

    @property
    def num_finishing(self) -> int:
        """Tasks out of their slots whose state is still on its way home (the copy-back):
        finished once it is there (a few ms; not counted in ``num_active``)."""
        return self.engine.copyback.tasks

    @property
    def num_waiting(self) -> int:
        """Tasks waiting for a slot, those ``_admit`` is placing included (off the queue, not
        yet in a slot: /health showed neither queued nor active then)."""
        return len(self.waiting) + self._admitting

    @property
    def num_scoring(self) -> int:
        """Prompts waiting to be scored or being scored (``score``): each holds a queue place
        as a waiting task does."""
        return len(self._scores)

    def step(self) -> None:
        """One scheduler iteration (see module docstring). Only the owning thread calls it."""
        self._busy = True
        try:
            self._drop_stopped_waiting()
            self._admit()
            self._prefill()
            self._announce_under_way()
            if self._scores:
                self._score_some()
            if self.decoding:
                self._pulse()
            self._shrink()
        except Exception as e:  # a fault fails the tasks in hand, never the scheduler
            self._fail_all(e)
        except KeyboardInterrupt as e:  # Ctrl-C in run(): a pulse cut short has moved the
            self._fail_all(e)  # device past its tasks' tokens; a later run() resumed them
            raise  # from there, wrong (a QA report): they end ("error") and run() stops
        else:
            self._run_later()
        finally:
            self._settle_cache()
            self._busy = False

    def _announce_under_way(self) -> None:
        """After the step's passes are queued: tell the tasks in slots (``Task._under_way``,
        once each). A reader waiting for it (the HTTP handler, before it builds its response)
        then runs its Python while the device computes, not while this thread prepares the
        pass (both need the GIL)."""
        for task in self.slots:
            if task is not None and task.under_way_callback is not None:
                task._under_way()

    def _run_later(self) -> None:
        """After the pulse: one checkpoint the prefiller put off (a chat turn's boundary state
        for the next turn). It serves no task in hand, so a fault here only drops such work."""
        try:
            self.prefiller.run_later(warm=not self.waiting)  # arrivals first
        except Exception as e:
            self.prefiller.drop_later()
            self.log.error(f"Computing a deferred prefix checkpoint failed (dropped): {e!r}")

    def _settle_cache(self) -> None:
        """After the step: the prefix cache's device tier back within its budget (the moves to
        host memory its first-token path put off). A fault drops the cache's entries (logged):
        they serve no task in hand, and the tier's budget holds again."""
        cache = self.prefix_cache
        if cache is None:
            return
        try:
            cache.settle()
        except Exception as e:
            cache.clear()
            self.log.error(f"Moving prefix states to host memory failed (cache cleared): {e!r}")

    def run(self) -> None:
        """Block until every submitted task has finished: steps on this thread, or waits for
        the daemon, or for another thread's ``run()`` to end (two threads stepping at once mixed
        up the slots: wrong tokens, failed pulses). ``RuntimeError`` from a task's callback
        (the scheduler's or the copy-back thread): it waited for itself for ever."""
        me = threading.current_thread()
        if me is self._thread or me is self._stepper or self.engine.copyback.on_thread:
            raise RuntimeError("scheduler.run() called from a task's callback would wait for "
                               "itself; call add_task() there and run() or wait() elsewhere")
        self._await_teardown(STEP_WAIT_S)  # (a shutdown() under way: the daemon is ending)
        with self._cv:  # (the daemon reads ``_stepper`` under this lock too)
            while self._stepper is not None and not self._daemon_alive:
                self._cv.wait()
            if self._daemon_alive:
                self._cv.wait_for(lambda: not self.has_work and not self._busy)
                return
            self._stepper = me
        SCHEDULER_THREAD.owner = self  # (callbacks run on this thread meanwhile)
        try:
            use_device(self.engine.device)  # (the model's GPU: this thread's current one)
            while self.has_work:
                if self._has_slot_work:
                    self.step()
                else:
                    self.engine.copyback.wait_idle(0.1)
        finally:  # (also on Ctrl-C: a shutdown() put off to here is done, never left pending)
            with self._cv:  # (checked under the lock shutdown() reads _stepper under: one from
                due = self._teardown_due  # the copy-back thread leaves its teardown to this
                if not due:  # run() until it ends)
                    self._stepper = None
                    self._cv.notify_all()
            if due:  # shutdown() from a callback of a step
                try:
                    self._teardown(10.0)
                finally:
                    with self._cv:
                        self._stepper = None
                        self._cv.notify_all()
            SCHEDULER_THREAD.owner = None

    def _stepper_settled(self, timeout: float) -> bool:
        """(shutdown) Wait until no run() on another thread is in a step with tasks in slots:
        it ends the stopped tasks first (released under its pulse: failed pulses, states short
        of their history; session 28's QA). Not for its end: from a finish callback on the
        copy-back thread that run() waits for the callback itself."""
        me, deadline = threading.current_thread(), time.monotonic() + timeout
        with self._cv:
            while self._stepper not in (None, me) and (self._busy or self._has_slot_work):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.05))  # (run() steps without notifying)
        return True

    @property
    def _daemon_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start_daemon(self) -> None:
        """Serve from a background thread: run tasks as they arrive, idle otherwise."""
        with self._cv:
            stopping = self._stopping
        if stopping:  # a shutdown() under way ends first (else this was a no-op, or the new
            # daemon stepped beside its teardown: tasks lost, the new daemon's atexit hook gone)
            me = threading.current_thread()
            if me is self._thread or me is self._stepper or self.engine.copyback.on_thread:
                raise RuntimeError("start_daemon() in a task's callback while shutdown() is "
                                   "under way; call it from another thread")
            self._await_teardown(STEP_WAIT_S)
        if self._thread is not None and self._thread.is_alive():
            return
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="rwkv-scheduler", daemon=True)
        self._thread.start()
        if self._at_exit is None:
            self._at_exit = functools.partial(_shutdown_at_exit, weakref.ref(self))
            atexit.register(self._at_exit)

    def _loop(self) -> None:
        SCHEDULER_THREAD.owner = self  # (callbacks run on this thread)
        use_device(self.engine.device)  # (the model's GPU: this thread's current one)
        while self._running:
            with self._cv:  # a run() begun before the daemon steps until it returns
                mine = self._has_slot_work and self._stepper is None
            if mine:
                self.step()
                self._idle_trim.worked()
                with self._cv:
                    self._cv.notify_all()
            elif self._idle_trim.due() and self._stepper is None and self._quiet():
                # (outside the lock: add_task never waits for it)
                self._idle_trim.trim(busy=lambda: self._has_slot_work)
            else:
                with self._cv:
                    self._cv.notify_all()
                    # the check is repeated under the lock: a task added after the one above
                    # (its notify already sent) must not wait for the timeout
                    if (self._has_slot_work and self._stepper is None) or not self._running:
                        continue
                    # one wait, then the loop checks again: a next-turn prefix queued meanwhile
                    # (its notify) sets a shorter timeout, the time until it is due
                    due = self.prefiller.warm_wait()
                    self._cv.wait(0.5 if due is None else min(0.5, due + 1e-3))
        with self._cv:  # shutdown() from a callback of the last step; not when a run() begun
            # before the daemon steps: that run() tears down when its step ends (not under it)
            due = self._teardown_due and self._stepper is None
        if due:
            self._teardown(10.0)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every task, join the thread and free device memory. A step still running after
        ``timeout`` is waited for (with a warning; up to STEP_WAIT_S more, then the device is
        taken as hung): its slots and tasks are the thread's until it ends (released while it
        ran, a task finished "abort" with a history short of its state). From a callback on
        this scheduler's stepping thread (the daemon, or a run() caller in its step) that step
        is not over: the queue is emptied and the tasks stopped now, the slots and the device
        memory freed when it has ended (``_teardown``, at the end of the loop or of run()).
        Joining itself raised there, and run()'s slots were released under its pulse. The same
        from a finish callback on the copy-back thread while a thread steps: that step may be
        waiting for room in the copy-back budget, which only this thread makes (joining it
        waited out both time limits, ~130 s by default)."""
        me = threading.current_thread()
        stepping = me is self._thread or me is self._stepper
        with self._cv:
            under_way = self._stopping
            if not under_way:
                if not stepping and self.engine.copyback.on_thread:  # (run() reads _stepper
                    stepping = self._daemon_alive or self._stepper is not None  # under here)
                # (set first: a daemon that sees _running false sees it too)
                self._teardown_due = stepping
                self._stopping = True
                self._running = False  # (before any callback below: a start_daemon() there
                pending = list(self.waiting)  # waits for this shutdown, never a no-op)
                self.waiting.clear()
        if under_way:  # another shutdown() is under way: wait for its teardown (not on a
            if not stepping and not self.engine.copyback.on_thread:  # thread it waits for)
                self._await_teardown(timeout + STEP_WAIT_S)
            return
        self._fail_scores("the scheduler shut down")  # (first: a task callback below may raise)
        try:
            finish_all((task, "abort", None) for task in pending)
        except BaseException:  # Ctrl-C in a callback (main thread): every queued task
            self._shutdown_rest(stepping, timeout)  # is finished, and the shutdown goes on
            raise  # first (it stranded them, and left the scheduler stopping for ever)
        self._shutdown_rest(stepping, timeout)

    def _shutdown_rest(self, stepping: bool, timeout: float) -> None:
        """``shutdown()`` once the queue is emptied: stop the tasks in slots, wait for the
        stepping thread, tear down."""
        for task in self.slots:
            if task is not None:
                task.stop()
        with self._cv:
            self._cv.notify_all()
        if stepping:
            return
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self.log.warning(f"A scheduler step is still running after {timeout} s; "
                                 f"waiting up to {STEP_WAIT_S:.0f} s more for it to end")
                self._thread.join(STEP_WAIT_S)
        if not self._stepper_settled(timeout):
            self.log.warning(f"run() on another thread is still stepping after {timeout} s; "
                             f"waiting up to {STEP_WAIT_S:.0f} s more for it to end")
            self._stepper_settled(STEP_WAIT_S)
        self._teardown(timeout)

    def _await_teardown(self, timeout: float) -> None:
        """Wait until a ``shutdown()`` under way has torn down and its daemon has ended (a
        script ending meanwhile aborted: the thread was inside torch). No-op otherwise."""
        with self._cv:
            if not self._stopping:
                return
            self._cv.wait_for(lambda: not self._stopping, timeout)
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)

    def _teardown(self, timeout: float) -> None:
        """(shutdown, once no step runs) Release the slots' tasks ("abort") and free the device
        memory. A fault releasing one slot does not keep the others' tasks running. Ends the
        shutdown under way, whatever happens here."""
        interrupt = None
        try:
            for slot, task in enumerate(self.slots):
                if task is not None:
                    try:
                        self._release([slot], "abort")
                    except Exception as e:  # (its tasks are finished: _release)
                        self.log.error(f"Releasing slot {slot} at shutdown failed: {e!r}")
                        if self.slots[slot] is task:  # unless the fault came before _release
                            # took it out of its slot (prefiller.on_release): it ends here
                            self._take_lost(slot)
                            finish_all([(task, "error", f"{type(e).__name__}: {e}")])
                    except BaseException as e:  # Ctrl-C in a callback (main thread): the
                        interrupt = interrupt or e  # other slots first, raised at the end
            if not self.engine.copyback.on_thread:  # (from a finish callback: it waited for
                self.engine.copyback.wait_idle(timeout)  # itself)
            self.prefiller.drop_later()
            self.engine.release()  # frees the slot buffers and the decode graphs
            self.slots = [None]
            if self.prefix_cache is not None:
                self.prefix_cache.clear()
            if self.engine.device.type == "cuda":
                import torch

                torch.cuda.empty_cache()
        finally:
            # last: until here the daemon may be inside torch (no new daemon started meanwhile:
            # start_daemon waits for this shutdown, so the hook is the stopped daemon's)
            if self._at_exit is not None:
                atexit.unregister(self._at_exit)
                self._at_exit = None
            with self._cv:  # a run() waiting on another thread returns: nothing is left to do
                self._teardown_due = self._stopping = False
                self._cv.notify_all()
        if interrupt is not None:
            raise interrupt
