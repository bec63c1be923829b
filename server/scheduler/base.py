"""BaseScheduler: self-enqueueing batched inference over a pool of slots.

Callers submit tasks from any thread (``new_task`` / ``add_task``) and walk away. One thread — the
daemon, or the caller of ``run()`` — owns the device and repeats ``step()``:

1. admit waiting tasks into free slots (subclasses choose the capacity: ``target_capacity``);
2. prefill up to ``prefill_chunk`` prompt tokens across admitted tasks, batched (``Prefiller``;
   with a ``PrefixCache``, cached prefixes are loaded instead of computed);
3. start decoding the tasks whose prompt is fully fed (``max_tokens=0`` tasks finish here);
4. run one pulse of decode steps for all live slots and hand tokens to the tasks: ``buffer_size``
   steps, except right after tasks start, when pulses ramp up 1, 2, 4, … steps (``_pulse``);
5. finished tasks free their slot at once; tasks that keep their state finish once the copy-back
   thread has brought it home (CPU) — the batch does not wait; capacity is adjusted.

The scheduler keeps host bookkeeping only (which task sits in which slot); ``BatchEngine`` holds
every device tensor.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque

from server.logger import get_logger
from server.scheduler.engine import REASON_EOS, REASON_LENGTH, REASON_STOP, BatchEngine
from server.scheduler.prefill import Prefiller
from server.scheduler.stats import SchedulerStats
from server.task.task import Status, Task

REASON_NAMES = {REASON_EOS: "stop", REASON_LENGTH: "length", REASON_STOP: "abort"}


class QueueFull(RuntimeError):
    """Raised by ``add_task`` when ``max_queue`` tasks are already waiting."""


class BaseScheduler:
    log_name = "scheduler.base"

    def __init__(self, loader, max_batch_size: int = 256, buffer_size: int = 32,
                 prefill_chunk: int = 4096, max_queue: int = 1 << 30, prefix_cache=None):
        self.loader = loader
        self.max_batch_size = max_batch_size
        self.buffer_size = buffer_size
        self.prefill_chunk = prefill_chunk
        self.max_queue = max_queue
        self.log = get_logger(self.log_name)
        self.engine = BatchEngine(loader.model)
        self.sampler = self.engine.sampler
        # prompt feeding and the prefix state cache (``prefix_cache``: a PrefixCache or None)
        self.prefix_cache = prefix_cache
        self.prefiller = Prefiller(self.engine, prefix_cache)
        self.stats = SchedulerStats()
        self.slots: list[Task | None] = [None]  # host view of engine slots
        self.decoding: set[int] = set()  # slots that are live in the engine
        self.waiting: deque[Task] = deque()
        self._ramp = buffer_size  # steps of the next pulse (1 right after tasks start, see _pulse)
        self._last_info = 0.0  # when a pulse line was last logged at INFO
        self._stops: list[Task] = []  # stop requests not yet applied to slots (any thread appends)
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._running = False
        self._busy = False  # True while step() has work in hand
        self.iteration = 0
        self.pulses: deque[dict] = deque(maxlen=100_000)  # per-pulse stats (bench/stress)
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
                 task_id: str = "TMP") -> Task:
        """Create a task for ``prompt`` (text or token ids) and enqueue it."""
        tokens = self.loader.encode(prompt) if isinstance(prompt, str) else list(prompt)
        task = Task(tokens, task_id=task_id, max_tokens=max_tokens, temperature=temperature,
                    top_p=top_p, top_k=top_k, presence_penalty=presence_penalty,
                    repetition_penalty=repetition_penalty, penalty_decay=penalty_decay,
                    seed=seed, collect_callback=collect_callback,
                    finish_callback=finish_callback, tokenizer=self.loader)
        self.add_task(task)
        return task

    def add_task(self, task: Task) -> None:
        """Enqueue an existing task (new, forked or continued). Thread-safe."""
        if task.status in (Status.RUNNING, Status.FINISHED):
            raise ValueError(f"task {task.task_id} is {task.status.name}; "
                             "call continue_gen() on a finished task first")
        if task.tokenizer is None:
            task.tokenizer = self.loader
        with self._cv:
            if len(self.waiting) >= self.max_queue:
                raise QueueFull(f"{len(self.waiting)} tasks are waiting (max_queue={self.max_queue})")
            task._stop_hook = self._on_stop
            task._t_queued = time.perf_counter()  # time to first token counts from here
            self.waiting.append(task)
            self._cv.notify_all()

    def _on_stop(self, task: Task) -> None:
        """Any thread: note the request; the scheduler thread maps it to a slot before each step."""
        with self._cv:
            self._stops.append(task)
            self._cv.notify_all()

    def _apply_stops(self) -> None:
        """Scheduler thread, before each decode step: flag the slots of tasks asked to stop.
        (Tasks not decoding yet see ``task.stop_requested`` when they would start.)"""
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
        return bool(self.waiting) or any(t is not None for t in self.slots)

    @property
    def num_active(self) -> int:
        return sum(t is not None for t in self.slots)

    def step(self) -> None:
        """One scheduler iteration (see module docstring). Only the owning thread calls it."""
        self._busy = True
        try:
            self._drop_stopped_waiting()
            self._admit()
            self._prefill()
            if self.decoding:
                self._pulse()
            self._shrink()
        except Exception as e:  # a fault fails the tasks in hand, never the scheduler
            self._fail_all(e)
        finally:
            self._busy = False

    def run(self) -> None:
        """Block until every submitted task has finished."""
        if self._thread is not None and self._thread.is_alive():
            with self._cv:
                self._cv.wait_for(lambda: not self.has_work and not self._busy)
            return
        while self.has_work:
            if self._has_slot_work:
                self.step()
            else:
                self.engine.copyback.wait_idle(0.1)

    def start_daemon(self) -> None:
        """Serve from a background thread: run tasks as they arrive, idle otherwise."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="rwkv-scheduler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while self._running:
            if self._has_slot_work:
                self.step()
                with self._cv:
                    self._cv.notify_all()
            else:
                with self._cv:
                    self._cv.notify_all()
                    # the check is repeated under the lock: a task added after the one above
                    # (its notify already sent) must not wait for the timeout
                    self._cv.wait_for(lambda: self._has_slot_work or not self._running,
                                      timeout=0.5)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every task, join the thread and free device memory."""
        with self._cv:
            pending = list(self.waiting)
            self.waiting.clear()
        for task in pending:
            task._finish("abort")
        for task in self.slots:
            if task is not None:
                task.stop()
        self._running = False
        with self._cv:
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        for slot, task in enumerate(self.slots):
            if task is not None:
                self._release([slot], "abort")
        self.engine.copyback.wait_idle(timeout)
        self.engine.release()  # frees the slot buffers and the decode graphs
        self.slots = [None]
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        if self.engine.device.type == "cuda":
            import torch

            torch.cuda.empty_cache()

    # ---- phases ----------------------------------------------------------------------------
    def _drop_stopped_waiting(self) -> None:
        with self._cv:
            stopped = [t for t in self.waiting if t.stop_requested]
            for t in stopped:
                self.waiting.remove(t)
        for t in stopped:
            t._finish("abort")

    def _admit(self) -> None:
        with self._cv:
            if not self.waiting:
                return
            used = [i for i, t in enumerate(self.slots) if t is not None]
            target = self.target_capacity(len(used) + len(self.waiting))
            if target > self.capacity:
                self._resize(target, used)
            free = [i for i, t in enumerate(self.slots) if t is None]
            batch = [self.waiting.popleft() for _ in range(min(len(free), len(self.waiting)))]
        if not batch:
            return
        slots = free[: len(batch)]
        for slot, task in zip(slots, batch):  # in a slot before loading: a fault fails them too
            self.slots[slot] = task
            # what the task's CPU state stands for, restored if a fault loses the slot
            task._admitted_as = (len(task.history), list(task.pending), task.current_token)
        self.engine.load(slots, batch)
        self.stats.on_admit(batch)
        for task in batch:
            task.status = Status.PREFILL if task.needs_prefill else Status.READY
            task._t_admit = time.perf_counter()

    def _prefill(self) -> None:
        """Feed pending prompt tokens (all but the last) of admitted tasks, within the budget
        (``Prefiller``: with a prefix cache, cached prefixes are loaded instead of computed)."""
        work = [(slot, task) for slot, task in enumerate(self.slots)
                if task is not None and slot not in self.decoding and len(task.pending) > 1]
        if work:
            self.prefiller.run(work, self.prefill_chunk)
        self._start_ready()

    def _start_ready(self) -> None:
        start, finish = [], []
        for slot, task in enumerate(self.slots):
            if task is None or slot in self.decoding or len(task.pending) > 1:
                continue
            if task.pending:
                task.current_token = task.pending.pop()
            task.status = Status.READY
            if task.max_tokens <= 0 or task.current_token is None or task.stop_requested:
                finish.append(slot)
            else:
                start.append(slot)
        for slot in finish:
            task = self.slots[slot]
            reason = "abort" if task.stop_requested else "length" if task.max_tokens <= 0 else "stop"
            self._release([slot], reason)
        if start:
            tasks = [self.slots[s] for s in start]
            self.engine.start(start, [t.current_token for t in tasks], [t.max_tokens for t in tasks])
            for t in tasks:
                t.status = Status.RUNNING
                t._t_gen = time.perf_counter()
            self.decoding.update(start)
            self._ramp = 1

    def _pulse(self) -> None:
        # Right after tasks start, pulses ramp up 1, 2, 4, ... steps to buffer_size: the first
        # token reaches its reader at once, and text that needs a few tokens before any of it
        # can be shown (a chat reply's ">" closing the think tag, a character split over
        # tokens, a held-back "\n" that may start a stop string) follows within ~2x the steps
        # it needs, instead of after a whole buffer_size pulse. A handful of extra pulses per
        # start; steady decoding runs buffer_size steps a pulse.
        steps = min(self._ramp, self.buffer_size)
        self._ramp = min(2 * steps, self.buffer_size)
        t0 = time.perf_counter()
        res = self.engine.pulse(steps, before_step=self._apply_stops)
        dt = time.perf_counter() - t0
        self.iteration += 1
        n_tok = sum(len(res.tokens[s]) for s in self.decoding)
        active = len(self.decoding)
        stat = dict(iter=self.iteration, cap=self.capacity, active=active, tokens=n_tok, seconds=dt)
        self.pulses.append(stat)
        now = time.perf_counter()
        level = "INFO" if now - self._last_info >= 1.0 else "DEBUG"  # progress, ~1 line/s
        if level == "INFO":
            self._last_info = now
        self.log.log(level, f"Iter {self.iteration} cap={self.capacity} active={active} "
                     f"speed={n_tok / dt:.2f} tok/s per_task={n_tok / dt / max(active, 1):.2f} tok/s")
        finished: dict[str, list[int]] = {}
        for slot in sorted(self.decoding):
            task, toks = self.slots[slot], res.tokens[slot]
            reason = res.reason[slot]
            n_fed = len(toks) + (reason == REASON_EOS)
            task.history.extend(([task.current_token] + toks)[:n_fed])
            task.current_token = None if reason == REASON_EOS else res.current[slot]
            task.gen_time = time.perf_counter() - task._t_gen
            self.stats.on_tokens(task, len(toks), dt, steps)
            task._append_output(toks)
            if reason:
                finished.setdefault(REASON_NAMES[reason], []).append(slot)
        for name, slots in finished.items():
            self._release(slots, name)

    def _release(self, slots: list[int], reason: str, error: str | None = None) -> None:
        """Free finished slots and finish their tasks — tasks that keep their state once it is
        home (the copy runs on the copy-back thread while the batch goes on)."""
        tasks = [self.slots[s] for s in slots]
        if error is None:
            self.prefiller.on_release(slots, tasks)  # the prefix cache keeps their state
        home = [(s, t) for s, t in zip(slots, tasks)
                if error is None and getattr(t, "keep_state", True)]
        if home:
            self.engine.unload([s for s, _ in home], [t for _, t in home],
                               then=lambda ts, err: self._finish_home(ts, reason, err))
        self.engine.free(slots)
        going_home = {id(t) for _, t in home}
        for slot, task in zip(slots, tasks):
            self.slots[slot] = None
            self.decoding.discard(slot)
            if id(task) not in going_home:
                task._finish(reason, error)

    def _finish_home(self, tasks: list[Task], reason: str, error: str | None) -> None:
        """Copy-back thread: the tasks' state is home (or failed to come): finish them."""
        for task in tasks:
            if error is not None:
                self._restore_admitted(task)
            task._finish("error" if error else reason, error)
        with self._cv:
            self._cv.notify_all()

    @staticmethod
    def _restore_admitted(task: Task) -> None:
        """The slot's state is lost: back to what the task's own (CPU) state stands for."""
        n_hist, task.pending, task.current_token = task._admitted_as
        del task.history[n_hist:]

    def _shrink(self) -> None:
        used = [i for i, t in enumerate(self.slots) if t is not None]
        with self._cv:
            needed = len(used) + len(self.waiting)
        target = self.target_capacity(needed)
        if target < self.capacity:
            self._resize(target, used)

    def _resize(self, cap: int, used: list[int]) -> None:
        t0 = time.perf_counter()
        old = self.engine.capacity if self.slots else 0
        self.engine.resize(cap, used)
        tasks = [self.slots[i] for i in used]
        self.slots = tasks + [None] * (cap - len(tasks))
        remap = {old_i: new_i for new_i, old_i in enumerate(used)}
        self.decoding = {remap[i] for i in self.decoding}
        ms = (time.perf_counter() - t0) * 1000
        if old and old != cap:
            self.resizes.append(dict(frm=old, to=cap, tasks=len(used), ms=ms))
            self.log.info(f"Compact {len(used)} tasks, cap {old} -> {cap} in {ms:.1f} ms")

    def _fail_all(self, exc: Exception) -> None:
        msg = f"{type(exc).__name__}: {exc}"
        self.log.error(f"Pulse failed, failing {self.num_active} tasks: {msg}\n{traceback.format_exc()}")
        slots = [i for i, t in enumerate(self.slots) if t is not None]
        for slot in slots:
            task = self.slots[slot]
            self.slots[slot] = None
            self._restore_admitted(task)
            try:
                task._finish("error", msg)
            except Exception as e:  # a failing listener must not keep the others unfinished
                self.log.error(f"Finishing {task.task_id} after the fault failed: {e!r}")
        self.decoding.clear()
        self.engine.resize(self.initial_capacity(), [])
        self.slots = [None] * self.engine.capacity
