"""Where one request's time goes in the scheduler: "prefill other", "queue" and "first pulse"
of ``ttft``. ``python -m server.bench ttft --stages`` wraps the methods below on the cached
scheduler for the last turn of one more conversation and prints, per method, its calls and wall
time (nested: ``_prefill`` contains ``_jump``, ``_store``, ...; on CUDA ``engine.prefill`` is
synchronised by the ttft probe, so the others are host time plus any wait of their own).
``--timeline`` places each call on a time line instead, the host's and the device's (CUDA
events): what the host did while the device worked, and where it waited."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from server.bench import common

# (label, path from the scheduler, method name)
TARGETS = (
    ("scheduler._admit", "", "_admit"), ("engine.load", "engine", "load"),
    ("scheduler._prefill", "", "_prefill"), ("prefiller._seq", "prefiller", "_seq"),
    ("prefiller._jump", "prefiller", "_jump"), ("cache.lookup", "prefiller.cache", "lookup"),
    ("prefiller._shares", "prefiller", "_shares"),
    ("prefiller._choose_points", "prefiller", "_choose_points"),
    ("prefiller._plan", "prefiller", "_plan"),
    ("prefiller._keep_later", "prefiller", "_keep_later"),
    ("prefiller._feed", "prefiller", "_feed"), ("engine.prefill", "engine", "prefill"),
    ("prefiller._store", "prefiller", "_store"), ("cache.insert", "prefiller.cache", "insert"),
    ("cache._rebalance", "prefiller.cache", "_rebalance"),
    ("scheduler._start_ready", "", "_start_ready"), ("engine.start", "engine", "start"),
    ("engine.write_params", "engine", "write_params"),
    ("scheduler._pulse", "", "_pulse"), ("engine.pulse", "engine", "pulse"),
    ("sampler.sample", "engine.sampler", "sample"), ("stats.on_tokens", "stats", "on_tokens"),
    ("prefiller.run_later", "prefiller", "run_later"),
)


# more calls placed on the timeline: the request's arrival, the model's prefill, its graph pass
TIMELINE_EXTRA = (
    ("scheduler.add_task", "", "add_task"), ("model.prefill", "engine.model", "prefill"),
    ("graphed pass", "engine.model._graphed_prefill", "_run"),
)


def _resolve(root, path: str):
    for part in filter(None, path.split(".")):
        root = getattr(root, part, None)
    return root


@contextmanager
def _wrapping(sched, targets, around):
    """While inside, each method of ``targets`` found on ``sched`` runs as
    ``around(label, method, *args, **kwargs)``; afterwards the methods are as they were."""
    saved = []
    for label, path, name in targets:
        obj = _resolve(sched, path)
        if obj is None:
            continue
        real = getattr(obj, name)

        def wrapped(*a, _real=real, _label=label, **k):
            return around(_label, _real, *a, **k)

        saved.append((obj, name, vars(obj).get(name)))  # an instance's own wrapper, if any
        setattr(obj, name, wrapped)
    try:
        yield
    finally:
        for obj, name, own in reversed(saved):
            if own is None:
                delattr(obj, name)  # the class's method again
            else:
                setattr(obj, name, own)


@contextmanager
def timed_stages(sched, times: dict):
    """While inside, calls of TARGETS' methods on ``sched`` add (calls, seconds) to ``times``."""
    def around(label, real, *a, **k):
        t0 = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            calls, s = times.get(label, (0, 0.0))
            times[label] = (calls + 1, s + time.perf_counter() - t0)

    with _wrapping(sched, TARGETS, around):
        yield times


@contextmanager
def timeline(sched, out: list):
    """While inside, every call of TARGETS' and TIMELINE_EXTRA's methods on ``sched`` becomes a
    record in ``out`` (sorted by entry, on leaving): its nesting depth, label, the host's
    entry and exit, the calling thread's CPU time meanwhile (much less than exit - entry: the
    thread waited, for the device, a lock, the GIL or a core), and on CUDA when the device reached each of them: a CUDA event recorded at
    entry and exit on the calling thread's stream, read against one recorded with the device
    idle as the context starts (seconds from then). A device time later than the host's is
    work queued ahead; a host exit equal to the device's is a wait for the device. Each event
    costs a few µs of host time."""
    import torch

    cuda = torch.device(sched.engine.device).type == "cuda"
    local, calls = threading.local(), []

    def event():
        if not cuda:
            return None
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def around(label, real, *a, **k):
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        ev_in, t_in, c_in = event(), time.perf_counter(), time.thread_time()
        try:
            return real(*a, **k)
        finally:
            t_out, cpu = time.perf_counter(), time.thread_time() - c_in
            calls.append((depth, label, t_in, t_out, cpu, ev_in, event()))
            local.depth = depth

    if cuda:
        torch.cuda.synchronize()
        ref = event()
        ref.synchronize()
    t_ref = time.perf_counter()
    try:
        with _wrapping(sched, TARGETS + TIMELINE_EXTRA, around):
            yield out
    finally:
        if cuda:
            torch.cuda.synchronize()
        for depth, label, t_in, t_out, cpu, ev_in, ev_out in sorted(calls, key=lambda c: c[2]):
            dev = ((ref.elapsed_time(ev_in) / 1e3, ref.elapsed_time(ev_out) / 1e3) if cuda
                   else (None, None))
            out.append(dict(depth=depth, label=label, host_in=t_in - t_ref,
                            host_out=t_out - t_ref, cpu=cpu, device_in=dev[0],
                            device_out=dev[1]))


def timeline_report(records: list, first_token: float | None = None, nth: int = 0) -> str:
    """A table of ``timeline`` records in ms from the entry of the ``nth`` ``add_task``
    (0: the first); ``first_token``: the request's TTFT (s from add_task): the calls entered
    from then until the token, and the token as a last row."""
    starts = [r["host_in"] for r in records if r["label"] == "scheduler.add_task"]
    t0 = starts[nth] if starts else 0.0
    if first_token is not None:
        records = [r for r in records if r["host_out"] >= t0]  # calls still running from then

    def at(s):
        return "-" if s is None else f"{(s - t0) * 1e3:.2f}"

    shown = [r for r in records
             if first_token is None or r["host_in"] - t0 <= first_token]  # up to the token
    rows = [["· " * r["depth"] + r["label"], at(r["host_in"]), at(r["host_out"]),
             f"{r['cpu'] * 1e3:.2f}", at(r["device_in"]), at(r["device_out"])] for r in shown]
    if first_token is not None:
        rows.append(["first token (callback)", at(t0 + first_token), "", "", "", ""])
    more = f"\n({len(records) - len(shown)} later calls not shown)" if len(shown) < len(
        records) else ""
    return common.table(["call", "host in", "host out", "thread cpu ms", "device in",
                         "device out"], rows) + more


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
