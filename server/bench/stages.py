"""Host time of named scheduler methods during one request: where "prefill other", "queue" and
"first pulse" of ``ttft`` go. ``python -m server.bench ttft --stages`` wraps the methods below on
the cached scheduler for the last turn of one more conversation and prints, per method, its
calls and wall time (nested: ``_prefill`` contains ``_jump``, ``_store``, ...; on CUDA
``engine.prefill`` is synchronised by the ttft probe, so the others are host time plus any wait
of their own)."""

from __future__ import annotations

import time
from contextlib import contextmanager

from server.bench import common

# (label, path from the scheduler, method name)
TARGETS = (
    ("scheduler._admit", "", "_admit"), ("engine.load", "engine", "load"),
    ("scheduler._prefill", "", "_prefill"), ("prefiller._seq", "prefiller", "_seq"),
    ("prefiller._jump", "prefiller", "_jump"), ("cache.lookup", "prefiller.cache", "lookup"),
    ("prefiller._plan", "prefiller", "_plan"),
    ("prefiller._keep_later", "prefiller", "_keep_later"),
    ("prefiller._feed", "prefiller", "_feed"), ("engine.prefill", "engine", "prefill"),
    ("prefiller._store", "prefiller", "_store"), ("cache.insert", "prefiller.cache", "insert"),
    ("cache._rebalance", "prefiller.cache", "_rebalance"),
    ("scheduler._start_ready", "", "_start_ready"), ("engine.start", "engine", "start"),
    ("scheduler._pulse", "", "_pulse"), ("engine.pulse", "engine", "pulse"),
    ("prefiller.run_later", "prefiller", "run_later"),
)


def _resolve(root, path: str):
    for part in filter(None, path.split(".")):
        root = getattr(root, part)
    return root


@contextmanager
def timed_stages(sched, times: dict):
    """While inside, calls of TARGETS' methods on ``sched`` add (calls, seconds) to ``times``."""
    saved = []
    for label, path, name in TARGETS:
        obj = _resolve(sched, path)
        if obj is None:
            continue
        real = getattr(obj, name)

        def wrapped(*a, _real=real, _label=label, **k):
            t0 = time.perf_counter()
            try:
                return _real(*a, **k)
            finally:
                calls, s = times.get(_label, (0, 0.0))
                times[_label] = (calls + 1, s + time.perf_counter() - t0)

        saved.append((obj, name, vars(obj).get(name)))  # an instance's own wrapper, if any
        setattr(obj, name, wrapped)
    try:
        yield times
    finally:
        for obj, name, own in reversed(saved):
            if own is None:
                delattr(obj, name)  # the class's method again
            else:
                setattr(obj, name, own)


@contextmanager
def profiled_first_step(sched, out: dict):
    """While inside, the first ``sched.step()`` (the one that admits, prefills and pulses the
    request just added) runs under torch.profiler on the scheduler's own thread; its op table
    (host time by torch op, then the step's wall time) lands in ``out["table"]``. Shows which
    ops a request's first step spends its host time on (ops are slower under the profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    real = sched.step

    def step():
        if "table" in out:
            return real()
        acts = [ProfilerActivity.CPU]
        with profile(activities=acts) as prof:
            t0 = time.perf_counter()
            real()
            wall = time.perf_counter() - t0
        events = prof.key_averages()
        ops = sum(e.self_cpu_time_total for e in events) / 1e3
        out["table"] = (events.table(sort_by="self_cpu_time_total", row_limit=30,
                                     max_name_column_width=50)
                        + f"\nstep wall {wall * 1e3:.2f} ms under the profiler; torch ops' "
                        f"self host time {ops:.2f} ms (the rest: Python)")
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    sched.step = step
    try:
        yield out
    finally:
        del sched.step  # the class's method again


def report(times: dict) -> str:
    rows = [[label, times[label][0], f"{times[label][1] * 1e3:.2f}"]
            for label, *_ in TARGETS if label in times]
    return common.table(["method", "calls", "ms"], rows)
