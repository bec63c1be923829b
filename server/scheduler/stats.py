"""SchedulerStats: token counters and latency histograms kept by the scheduler thread.

Plain numbers (no metrics library here): the API layer exports them (``/metrics``). Written by the
scheduler thread only; ``snapshot`` may be called from any thread.

* ``prompt_tokens``: prompt tokens of admitted tasks (tokens in), counted at admission (a task
  stopped mid-prompt counts all of them; those the prefix cache resumes too): each choice of an
  OpenAI request with ``n > 1`` is a task and counts its prompt; a continued or forked task
  counts the last generated token it now feeds (counted as generated before);
* ``generated_tokens``: tokens handed to tasks (tokens out);
* ``ttft``: seconds from ``add_task`` (or from the request's arrival, ``Task.arrived``, where the
  API set it: an echoed prompt is scored before its task is queued) to the end of the pulse that
  produced a task's first token (what a streaming client waits for);
* ``tpot``: seconds per decode step of each pulse, once per task in the pulse that ran a decode
  step for it (the time between two tokens of one stream): not the one-step pulse that only
  samples a task's first token from its prefill's logits (it was a sample of ~2.5 ms for every
  request on the tiny model against ~10 ms decode steps; session 38's QA);
* ``nonfinite_tasks``: tasks failed because the model's output became NaN or infinite
  (``cycle._fail_broken``: a numeric overflow or a broken imported state).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left

TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class Histogram:
    """Fixed upper bounds; ``counts[i]`` = observations in (bounds[i-1], bounds[i]], last = +Inf."""

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, int]]:
        """``[(upper bound, count of observations <= it)]`` ending with ``("+Inf", total)``."""
        out, total = [], 0
        for bound, n in zip([*map(str, self.bounds), "+Inf"], self.counts):
            total += n
            out.append((bound, total))
        return out


class SchedulerStats:
    def __init__(self):
        self._lock = threading.Lock()
        self.prompt_tokens = 0
        self.generated_tokens = 0
        self.nonfinite_tasks = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.tpot = Histogram(TPOT_BUCKETS)

    def on_admit(self, tasks) -> None:
        with self._lock:
            self.prompt_tokens += sum(len(t.pending) for t in tasks)

    def on_tokens(self, task, n: int, pulse_s: float, steps: int, decoded: int) -> None:
        """A pulse of ``steps`` steps taking ``pulse_s`` gave ``task`` ``n`` tokens (called
        before they are appended to its output), ``decoded`` of those steps decoding for it
        (one fewer when its first token came from its prefill's logits)."""
        if n <= 0:
            return
        with self._lock:
            self.generated_tokens += n
            queued = getattr(task, "_t_queued", None)
            if not task.output and queued is not None:
                self.ttft.observe(time.perf_counter() - queued)
            if decoded > 0:
                self.tpot.observe(pulse_s / max(steps, 1))

    def on_nonfinite(self, n: int) -> None:
        with self._lock:
            self.nonfinite_tasks += n

    def snapshot(self) -> dict:
        with self._lock:
            return {"prompt_tokens": self.prompt_tokens,
                    "generated_tokens": self.generated_tokens,
                    "nonfinite_tasks": self.nonfinite_tasks,
                    "ttft": (self.ttft.cumulative(), self.ttft.sum),
                    "tpot": (self.tpot.cumulative(), self.tpot.sum)}
