"""CopyBack: finished slots' state goes home to their tasks without stalling the running batch.

The scheduler thread only *gathers* the rows on the device (``gather_rows``: a few device
copies, queued in order before any later reuse of those slots). A copy-back thread then moves
them to host memory — on CUDA through one reusable pinned staging buffer on a side stream,
which overlaps the next pulses instead of waiting behind them — clones each row into ordinary
memory (tasks keep their state indefinitely), hands it to the tasks and calls
``then(tasks, error)`` (the scheduler finishes them there: a task is FINISHED only once its
state is home).

Memory is bounded: a submission is gathered in groups of at most ``GROUP_BYTES`` and at most
``BUDGET_BYTES`` of gathered rows wait for the copy-back at any time; past that, the scheduler
thread waits for earlier groups to reach host memory before gathering more (so 256 finished
21 MB states of a 2.9B model take at most 256 MiB of transient device memory instead of 5.4 GB;
a group is gathered in one copy, without an intermediate, and leaves the budget once it is in
the staging buffer, before its rows are cloned out). The staging buffer holds one group (it
grows only for a single row larger than a group).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from dataclasses import dataclass

import torch

from server.logger import get_logger
from server.model.cuda_graph import CAPTURE_LOCK
from server.model.state import State, to_device
from server.task.task import SCHEDULER_THREAD

log = get_logger("scheduler.copy")
IDLE_EXIT_S = 5.0  # the thread ends after this long without work (started again on demand)
# gathered rows not yet copied home, at most (a larger single row: alone); served:
# ``RWKV_COPYBACK_MB``. Session 66 (H100, 2.9B, the seed's stress test, 256 / 1,024 MiB
# alternating, twice): 84 / 86 % of its peak against 85 / 86 %, peak 9.0 against 9.3 GB
# allocated (9.7 against 10.5 reserved); before session 65's copy-back changes (session 64, one
# run each) 81 against 86 %
BUDGET_BYTES = 256 << 20
GROUP_BYTES = 256 << 20  # rows gathered and copied together, at most; the pinned staging size
_ALIGN = 256  # byte alignment of each tensor inside the staging buffer


@dataclass
class Gathered:
    """Rows of finished slots, gathered on the device (each tensor its own storage)."""

    wkv: torch.Tensor  # [L, n, H, N, N] state dtype (the state's own layout: one copy)
    shift: torch.Tensor  # [L, 2, n, C] run dtype
    penalties: torch.Tensor  # [n, V] f32
    counter: torch.Tensor  # [n] i64
    ready: torch.cuda.Event | None  # recorded after the gather (CUDA), else None

    def tensors(self) -> tuple:
        return self.wkv, self.shift, self.penalties, self.counter

    def drop(self) -> None:
        self.wkv = self.shift = self.penalties = self.counter = None


def row_bytes(state: State, penalties: torch.Tensor, counter: torch.Tensor) -> int:
    """Bytes that one gathered row takes (state, penalties and counter)."""
    b = state.batch_size
    return state.row_bytes() + sum(t.numel() // b * t.element_size() for t in (penalties, counter))


def split_groups(n: int, nbytes: int, group_bytes: int) -> list[range]:
    """Consecutive index ranges covering ``range(n)``, each of at most ``group_bytes`` at
    ``nbytes`` a row (at least one row each)."""
    per = max(1, group_bytes // max(nbytes, 1))
    return [range(a, min(a + per, n)) for a in range(0, n, per)]


def gather_rows(state: State, penalties: torch.Tensor, counter: torch.Tensor,
                slots: list[int]) -> Gathered:
    """Device copies of rows ``slots``, in the state's layout (scheduler thread): one copy of
    each row, no intermediate (the rows are made contiguous on the host, ``split_rows``)."""
    idx = to_device(slots, state.device)  # pinned: a pageable upload waits for the device
    g = Gathered(state.wkv.index_select(1, idx), state.shift.index_select(2, idx),
                 penalties.index_select(0, idx), counter.index_select(0, idx), None)
    if state.device.type == "cuda":
        g.ready = torch.cuda.Event()
        g.ready.record()
    return g


class Staging:
    """A reusable host buffer that gathered rows are copied into (pinned on CUDA): allocated at
    first use, grown only when a copy needs more. Used under CAPTURE_LOCK (allocating pinned
    memory is not allowed while another thread captures a graph)."""

    def __init__(self, min_bytes: int, pin: bool):
        self.min_bytes, self.pin = min_bytes, pin
        self.buf: torch.Tensor | None = None

    @property
    def nbytes(self) -> int:
        return 0 if self.buf is None else self.buf.numel()

    def copy_in(self, tensors, stream) -> list[torch.Tensor]:
        """Host views of ``tensors`` copied into the buffer (complete when this returns)."""
        sizes = [t.numel() * t.element_size() for t in tensors]
        offsets = [0]
        for n in sizes:
            offsets.append(offsets[-1] + -(-n // _ALIGN) * _ALIGN)
        if offsets[-1] > self.nbytes:
            self.buf = None  # the old buffer goes first
            self.buf = torch.empty(max(offsets[-1], self.min_bytes), dtype=torch.uint8,
                                   pin_memory=self.pin)
        host = [self.buf[o:o + n].view(t.dtype).view(t.shape)
                for o, n, t in zip(offsets, sizes, tensors)]
        for h, t in zip(host, tensors):
            h.copy_(t, non_blocking=stream is not None)
        if stream is not None:
            stream.synchronize()
        return host


def to_host(g: Gathered, stream=None, staging: Staging | None = None, freed=None, spent=None
            ) -> tuple[list[State], list[torch.Tensor], list[int]]:
    """Per-row CPU states, penalties and counters of ``g`` (copy-back thread). With
    ``staging`` (CUDA) the rows are copied through it, on ``stream`` when given; ``g``'s
    tensors are dropped once copied, and ``freed()`` is then called (before the rows are
    cloned out of the staging buffer: the gathered rows' memory is free for the next group).
    Without, they are read where they are (CPU), and ``freed`` is not called. ``spent`` (a
    list) gets the seconds to host memory and the seconds cloning added to its [3] and [4]."""
    t0 = time.perf_counter()
    host = g.tensors()
    g.drop()  # (CPU: ``host`` holds the rows, read in place)
    if staging is not None:
        on_stream = torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()
        with CAPTURE_LOCK, on_stream:
            if g.ready is not None:
                stream.wait_event(g.ready)
                g.ready = None  # its event is destroyed here, under the lock, too
            host = staging.copy_in(host, stream)  # the device rows are freed here, under
            # the lock (the last reference was ``host``)
        if freed is not None:
            freed()
    t1 = time.perf_counter()
    rows = split_rows(*host)
    if spent is not None:
        spent[3] += t1 - t0
        spent[4] += time.perf_counter() - t1
    return rows


def split_rows(wkv, shift, pen, counter) -> tuple[list[State], list[torch.Tensor], list[int]]:
    """Each row of gathered host tensors (``Gathered``'s layout) as its own contiguous memory
    (tasks keep their state for good: a view would keep the whole group, or the staging
    buffer, alive)."""
    fmt = torch.contiguous_format
    states = [State(shift[:, :, i:i + 1].clone(memory_format=fmt),
                    wkv[:, i:i + 1].clone(memory_format=fmt)) for i in range(wkv.shape[1])]
    return states, [pen[i].clone() for i in range(pen.shape[0])], counter.tolist()


class CopyBack:
    """A thread that completes unloads in submission order (started when work arrives, ended
    when idle, so an engine that is dropped leaves no thread behind). ``budget`` and
    ``group_bytes`` default to BUDGET_BYTES and GROUP_BYTES; a group is at most the budget."""

    def __init__(self, device: torch.device, budget: int | None = None,
                 group_bytes: int | None = None):
        self.device = device
        self.owner = None  # the scheduler whose finish callbacks run on this thread
        self._group_max = GROUP_BYTES if group_bytes is None else group_bytes
        cuda = device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if cuda else None
        self.staging = Staging(self._group_max, pin=True) if cuda else None
        self.budget = BUDGET_BYTES if budget is None else budget  # (sets group_bytes)
        # tasks copied back, seconds the copy-back thread spent, seconds submit() waited for
        # room in the budget (the scheduler thread, its pulses held up meanwhile); of the
        # thread's seconds: getting the rows to host memory (waiting for their gather, the
        # copy into the staging buffer), cloning them out into each task's own memory
        self.stats = [0, 0.0, 0.0, 0.0, 0.0]
        self._queue: queue.Queue = queue.Queue()
        self._pending = 0  # groups queued or being copied
        self._tasks = 0  # their tasks: out of their slots, not yet finished
        self._in_flight = 0  # bytes gathered and not yet copied home
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def budget(self) -> int:
        return self._budget

    @budget.setter
    def budget(self, nbytes: int) -> None:
        """The budget (``RWKV_COPYBACK_MB``; set before any submit), and groups of at most it:
        a group goes through whenever nothing else is in flight, so with the default groups a
        budget below 256 MiB bounded nothing (session 66's review); the staging buffer
        shrinks with them."""
        self._budget = nbytes
        self.group_bytes = min(self._group_max, nbytes)
        if self.staging is not None:  # (each of a group's 4 tensors starts at an _ALIGN
            # boundary: a group of nearly group_bytes allocated the buffer again, ~1 KiB more;
            # session 67's mutation review)
            self.staging.min_bytes = self.group_bytes + 4 * _ALIGN

    def submit(self, state: State, penalties, counter, slots: list[int], tasks: list,
               then, handed: list | None = None) -> None:
        """Gather ``slots`` (in groups within the memory budget, waiting for earlier groups to
        be copied when needed: every row is gathered when this returns); later give each task
        its row and call ``then(group_tasks, error)`` once per group, in order — every task in
        exactly one call. ``then`` runs on the copy-back thread and must not wait for the
        scheduler thread (which may be waiting for the copy-back). ``handed`` (a list) gets
        each task as its group is queued: raising (Ctrl-C in ``run()`` while this waits for
        room), the tasks not in it are the caller's to finish."""
        nbytes = row_bytes(state, penalties, counter)
        # on this thread (a shutdown() in a finish callback sends the slots' states home) no
        # wait: the room would come from this very thread, which waited for itself for ever
        own = self.on_thread
        for rows in split_groups(len(slots), nbytes, self.group_bytes):
            size = nbytes * len(rows)
            with self._cv:  # room for this group, or nothing else in flight
                t0 = time.perf_counter()
                self._cv.wait_for(lambda size=size: own or self._in_flight == 0
                                  or self._in_flight + size <= self.budget)
                self.stats[2] += time.perf_counter() - t0
            try:
                g = gather_rows(state, penalties, counter, [slots[i] for i in rows])
            except Exception as e:  # this group and the rest fail (in order); earlier go on
                log.exception("gathering finished states failed")
                self._put(None, tasks[rows.start:], then, 0, f"{type(e).__name__}: {e}",
                          handed)
                return
            self._put(g, tasks[rows.start:rows.stop], then, size, None, handed)

    def _put(self, g, tasks, then, size: int, error: str | None, handed=None) -> None:
        with self._cv:
            if self._thread is None:  # started first: failing ("can't start new thread"), it
                # leaves nothing queued (the tasks are the caller's) and no thread taken for
                # running (nothing queued later was ever copied)
                thread = threading.Thread(target=self._run, name="rwkv-copyback", daemon=True)
                thread.start()
                self._thread = thread  # (before the put: it takes no item before then)
            self._pending += 1
            self._tasks += len(tasks)
            self._in_flight += size
            self._queue.put((g, tasks, then, size, error))
            if handed is not None:
                handed.extend(tasks)

    @property
    def busy(self) -> bool:
        return self._pending > 0

    @property
    def tasks(self) -> int:
        """Tasks whose state is on its way home: out of their slots, finished once it is."""
        return self._tasks

    @property
    def on_thread(self) -> bool:
        """Called on the copy-back thread (in a task's finish callback, say)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: self._pending == 0, timeout)

    def _run(self) -> None:
        SCHEDULER_THREAD.owner = self.owner  # finish callbacks run here (Task.wait refuses to
        # block it on a task of that scheduler)
        while True:
            try:
                item = self._queue.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                with self._cv:  # submit() puts and starts under the same lock
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            n = len(item[1])
            try:
                self._complete(*item)
            finally:
                del item
                with self._cv:
                    self._pending -= 1
                    self._tasks -= n
                    self._cv.notify_all()

    def _complete(self, g, tasks, then, size: int, error: str | None) -> None:
        t0 = time.perf_counter()
        left = [size]  # of the budget, not yet given back

        def freed() -> None:  # the gathered rows are gone (copied home, or lost): out of the
            # budget, so the scheduler may gather the next group while these rows are cloned
            with self._cv:
                self._in_flight -= left[0]
                left[0] = 0
                self._cv.notify_all()

        try:
            if g is not None:
                states, pens, counters = to_host(g, self.stream, self.staging, freed,
                                                 self.stats)
                for task, st, pen, c in zip(tasks, states, pens, counters):
                    task.state, task.penalties, task.rng_counter = st, pen, c
        except Exception as e:  # the tasks fail; the thread goes on
            log.exception("copying finished states back failed")
            error = f"{type(e).__name__}: {e}"
        finally:  # (to_host dropped the rows, whatever happened)
            freed()
        self.stats[0] += len(tasks)
        self.stats[1] += time.perf_counter() - t0
        try:
            then(tasks, error)
        except BaseException:  # (any: this thread going on is what later tasks wait for)
            log.exception("finishing tasks after their copy-back failed")
