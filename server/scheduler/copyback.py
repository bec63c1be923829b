"""CopyBack: finished slots' state goes home to their tasks without stalling the running batch.

The scheduler thread only *gathers* the rows on the device (``gather_rows``: a few device
copies, queued in order before any later reuse of those slots). A copy-back thread then moves
them to host memory — on CUDA through pinned buffers on a side stream, which overlaps the next
pulses instead of waiting behind them — clones each row into ordinary memory (tasks keep their
state indefinitely), hands it to the tasks and calls ``then(tasks)`` (the scheduler finishes
them there: a task is FINISHED only once its state is home).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

import torch

from server.logger import get_logger
from server.model.cuda_graph import CAPTURE_LOCK
from server.model.state import State

log = get_logger("scheduler.copy")
IDLE_EXIT_S = 5.0  # the thread ends after this long without work (started again on demand)


@dataclass
class Gathered:
    """Rows of finished slots, gathered on the device (each tensor its own storage)."""

    wkv: torch.Tensor  # [n, L, H, N, N] state dtype
    shift: torch.Tensor  # [n, L, 2, C] run dtype
    penalties: torch.Tensor  # [n, V] f32
    counter: torch.Tensor  # [n] i64
    ready: torch.cuda.Event | None  # recorded after the gather (CUDA), else None


def gather_rows(state: State, penalties: torch.Tensor, counter: torch.Tensor,
                slots: list[int]) -> Gathered:
    """Device copies of rows ``slots`` in row-major order (scheduler thread)."""
    idx = torch.tensor(slots, dtype=torch.long, device=state.device)
    g = Gathered(state.wkv.index_select(1, idx).transpose(0, 1).contiguous(),
                 state.shift.index_select(2, idx).permute(2, 0, 1, 3).contiguous(),
                 penalties.index_select(0, idx), counter.index_select(0, idx), None)
    if state.device.type == "cuda":
        g.ready = torch.cuda.Event()
        g.ready.record()
    return g


def to_host(g: Gathered, stream) -> tuple[list[State], list[torch.Tensor], list[int]]:
    """Per-row CPU states, penalties and counters of ``g`` (copy-back thread)."""
    tensors = (g.wkv, g.shift, g.penalties, g.counter)
    if g.ready is not None:
        with CAPTURE_LOCK, torch.cuda.stream(stream):
            stream.wait_event(g.ready)
            host = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
            for h, t in zip(host, tensors):
                h.copy_(t, non_blocking=True)
            stream.synchronize()  # the device tensors may be freed after this (copies done)
            g.wkv = g.shift = g.penalties = g.counter = None  # freed here, under the lock
        tensors = host
    wkv, shift, pen, counter = tensors
    states = [State(shift[i].unsqueeze(2).clone(), wkv[i].unsqueeze(1).clone())
              for i in range(wkv.shape[0])]
    return states, [pen[i].clone() for i in range(pen.shape[0])], counter.tolist()


class CopyBack:
    """A thread that completes unloads in submission order (started when work arrives, ended
    when idle, so an engine that is dropped leaves no thread behind)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.stats = [0, 0.0]  # tasks copied back, seconds the copy-back thread spent
        self._queue: queue.Queue = queue.Queue()
        self._pending = 0
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, state: State, penalties, counter, slots: list[int], tasks: list,
               then) -> None:
        """Gather ``slots`` now; later give each task its row and call ``then(tasks, error)``."""
        g = gather_rows(state, penalties, counter, slots)
        with self._cv:
            self._pending += 1
            self._queue.put((g, tasks, then))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rwkv-copyback",
                                                daemon=True)
                self._thread.start()

    @property
    def busy(self) -> bool:
        return self._pending > 0

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: self._pending == 0, timeout)

    def _run(self) -> None:
        while True:
            try:
                g, tasks, then = self._queue.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                with self._cv:  # submit() puts and starts under the same lock
                    if self._queue.empty():
                        self._thread = None
                        return
                continue
            t0 = time.perf_counter()
            error = None
            try:
                states, pens, counters = to_host(g, self.stream)
                for task, st, pen, c in zip(tasks, states, pens, counters):
                    task.state, task.penalties, task.rng_counter = st, pen, c
            except Exception as e:  # the tasks fail; the thread goes on
                log.exception("copying finished states back failed")
                error = f"{type(e).__name__}: {e}"
            del g
            self.stats[0] += len(tasks)
            self.stats[1] += time.perf_counter() - t0
            try:
                then(tasks, error)
            except Exception:
                log.exception("finishing tasks after their copy-back failed")
            with self._cv:
                self._pending -= 1
                self._cv.notify_all()
