"""Where a streamed chat request's time to first token goes over HTTP, on the server's side.

    python -m server.bench.http_stages                  # random tiny weights, on this machine
    python -m server.bench.http_stages --demo 2.9b      # (GPU machine: RWKV_DEVICE as usual)
    python -m server.bench.http_stages --model ck.pth   # a checkpoint (e.g. written once by
                                                        # python -m server.model.random)
    python -m server.bench.http_stages --timeline --loop-trace   # + the scheduler's calls and
                                                        # the event loop's callbacks

A server with random weights of ``--demo`` (``create_app``, the prefix cache on) runs in this
process under uvicorn; ``python -m server.bench.chat`` drives its conversation against it from
a subprocess, sending each turn twice (``--url-on`` and ``--url-off`` are this server: the
second request is the same prompt again, a whole-prompt cache hit). Timestamps are taken in the
server process from the moment the ASGI app receives the request (after uvicorn's parsing): the
body parsed and validated (``parse_request``), the prompt built and tokenised (``_check_length``
runs right after the tokens come back: ``server.api.encoding``), the tasks made and prepared
(prefix cache, templates), ``add_task``, the first token's callback on the scheduler thread,
and the first response body carrying text. Printed per request, in ms from arrival; the chat
bench's own table (client-side TTFT) comes first, so the part outside the app (uvicorn,
sockets, the client) is the client's TTFT minus "text"."""

from __future__ import annotations

import argparse
import gc
import contextlib
import importlib.util
import inspect
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from server.bench import common, stages

MARKS = ("parse_request", "_check_length", "prepare_tasks")  # handler steps, in order


class _Recorder:
    """Outermost ASGI wrapper: one record per chat request (arrival, first text sent)."""

    def __init__(self, app, records: list):
        self.app, self.records = app, records

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != "/v1/chat/completions":
            return await self.app(scope, receive, send)
        rec = {"arrival": time.perf_counter()}
        self.records.append(rec)

        async def sending(msg):
            body = msg.get("body", b"") if msg["type"] == "http.response.body" else b""
            if b'"content":"' in body and b'"content":""' not in body:
                rec.setdefault("text", time.perf_counter())
            await send(msg)

        await self.app(scope, receive, sending)


def _mark_handler_steps(records: list) -> None:
    """Timestamp the return of each MARKS function the chat handler calls (module globals)."""
    import server.api.routes.openai as routes

    for name in MARKS:
        real = getattr(routes, name)
        if inspect.iscoroutinefunction(real):
            async def marked(*a, _real=real, _name=name, **k):
                out = await _real(*a, **k)
                records[-1][_name] = time.perf_counter()
                return out
        else:
            def marked(*a, _real=real, _name=name, **k):
                out = _real(*a, **k)
                records[-1][_name] = time.perf_counter()
                return out
        setattr(routes, name, marked)


def _mark_scheduler(scheduler, records: list) -> None:
    """Timestamp ``add_task`` and the task's first token callback (scheduler thread)."""
    real_add = scheduler.add_task

    def add_task(task):
        rec = records[-1]
        rec["add_task"] = time.perf_counter()
        cb = task.collect_callback

        def first(tokens):
            rec.setdefault("first_token", time.perf_counter())
            if cb is not None:
                return cb(tokens)

        task.collect_callback = first
        return real_add(task)

    scheduler.add_task = add_task


@contextlib.contextmanager
def _gc_timed():
    """While inside, each garbage collection's generation and seconds (``gc.callbacks``)."""
    out, start = [], {}

    def note(phase, info):
        if phase == "start":
            start["t"] = time.perf_counter()
        elif "t" in start:
            out.append((info["generation"], time.perf_counter() - start.pop("t")))

    gc.callbacks.append(note)
    try:
        yield out
    finally:
        gc.callbacks.remove(note)


@contextlib.contextmanager
def _loop_traced(out: list, longer_than: float = 30e-6):
    """While inside, each asyncio callback (``Handle._run``: a task's step, a wake-up) that runs
    longer than ``longer_than`` s appends ``(start, end, what)``; ``what`` names a task by its
    chain of awaited coroutines. Pure-Python asyncio loops only (not uvloop's)."""
    import asyncio.events

    real = asyncio.events.Handle._run

    def run(handle):
        t0 = time.perf_counter()
        real(handle)
        t1 = time.perf_counter()
        if t1 - t0 > longer_than:
            out.append((t0, t1, _callback_name(handle._callback)))

    asyncio.events.Handle._run = run
    try:
        yield out
    finally:
        asyncio.events.Handle._run = real


def _callback_name(cb) -> str:
    coro = getattr(getattr(cb, "__self__", None), "get_coro", lambda: None)()
    if coro is None:
        return getattr(cb, "__qualname__", type(cb).__name__)
    chain = []
    while coro is not None and len(chain) < 16:
        chain.append(getattr(coro, "__qualname__", type(coro).__name__))
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
    names = [c for c in chain if "Middleware" not in c]
    return "task " + " > ".join(names if len(names) <= 4 else names[:1] + ["…"] + names[-3:])


def loop_report(handles: list, rec: dict) -> str:
    """The event loop's callbacks from the request's arrival to 1 ms after its first token."""
    a, end = rec["add_task"], rec.get("first_token", rec["add_task"]) + 1e-3
    rows = [[f"{(t0 - a) * 1e3:.2f}", f"{(t1 - a) * 1e3:.2f}", f"{(t1 - t0) * 1e3:.3f}", what]
            for t0, t1, what in handles if rec["arrival"] - 1e-3 <= t0 <= end]
    return common.table(["start", "end", "ms", "callback (> 30 us)"], rows)


def gc_report(collections: list) -> str:
    """Collections per generation with their total and longest ms."""
    parts = []
    for gen in range(3):
        ts = [t for g, t in collections if g == gen]
        if ts:
            parts.append(f"gen {gen}: {len(ts)} ({sum(ts) * 1e3:.1f} ms in all, longest "
                         f"{max(ts) * 1e3:.2f})")
    return "garbage collections during the run: " + ("; ".join(parts) or "none")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m server.bench.http_stages", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--demo", default="tiny", help="random-weights preset")
    p.add_argument("--model", help="a checkpoint to serve instead of --demo's random weights")
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--no-freeze", action="store_true",
                   help="serve without freezing the start-up heap (run.py freezes it), to "
                        "compare the full garbage collection timed at the end")
    p.add_argument("--timeline", action="store_true",
                   help="also put the last turn's two requests on the scheduler's host and "
                        "device time line (as ``ttft --timeline``; every call of the run is "
                        "recorded, a few µs each)")
    p.add_argument("--loop-trace", action="store_true",
                   help="serve on asyncio's own loop (not uvloop) and list, for the last turn's "
                        "two requests, the event loop's callbacks that ran longer than 30 us "
                        "(ms from add_task): what the loop did beside the scheduler thread")
    args = p.parse_args(argv)
    import uvicorn

    from server.api.app import create_app
    from server.bench.chat import free_port, wait_until_served
    from server.config import Settings

    tmp = tempfile.TemporaryDirectory(prefix="rwkv-http-stages-")
    port = free_port()
    weights = dict(model_path=args.model) if args.model else dict(demo=args.demo)
    settings = Settings(**weights, port=port, task_db_path=str(Path(tmp.name) / "tasks.db"))
    app = create_app(settings, freeze_heap=not args.no_freeze)  # as run.py by default
    records: list[dict] = []
    line: list[dict] = []  # --timeline's records
    _mark_handler_steps(records)
    handles: list = []
    config = uvicorn.Config(_Recorder(app, records), host="127.0.0.1", port=port, log_config=None,
                            **(dict(loop="asyncio") if args.loop_trace else {}))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_served(url, seconds=600)
        sched = app.state.runtime.scheduler
        _mark_scheduler(sched, records)
        look = stages.timeline(sched, line) if args.timeline else contextlib.nullcontext()
        traced = _loop_traced(handles) if args.loop_trace else contextlib.nullcontext()
        with look, traced, _gc_timed() as collections:
            subprocess.run([sys.executable, "-m", "server.bench.chat", "--url-on", url,
                            "--url-off", url, "--turns", str(args.turns)], check=True)
        t0 = time.perf_counter()
        gc.collect()  # what a full collection costs this served process now
        collected_ms = (time.perf_counter() - t0) * 1e3
        walked, frozen = len(gc.get_objects()), gc.get_freeze_count()
    finally:
        server.should_exit = True
        thread.join(30)
        tmp.cleanup()
    print(gc_report(collections))
    print(f"a full garbage collection after the run: {collected_ms:.1f} ms "
          f"({walked:,} objects walked, {frozen:,} frozen)")
    have = [m for m in ("httptools", "uvloop") if importlib.util.find_spec(m)]
    cls = getattr(config, "http_protocol_class", None)
    print(f"uvicorn: http {cls.__name__ if cls else config.http}, "
          f"loop {config.loop} (installed: {', '.join(have) or 'neither httptools nor uvloop'})")
    cols = ["parse_request", "_check_length", "prepare_tasks", "add_task", "first_token", "text"]
    rows = [[i // 2 + 1, "turn" if i % 2 == 0 else "again",
             *(f"{(r[c] - r['arrival']) * 1e3:.2f}" if c in r else "" for c in cols)]
            for i, r in enumerate(records)]
    print("\nms from the request's arrival in the app (\"again\": the same prompt a second time)")
    print(common.table(["turn", "request", "body parsed", "tokenised", "tasks prepared",
                        "add_task", "first token", "text sent"], rows), flush=True)
    for nth in range(max(0, len(records) - 2), len(records)) if handles else ():
        if "add_task" in records[nth]:
            print(f"\nrequest {nth + 1}: the event loop (ms from its add_task)\n"
                  f"{loop_report(handles, records[nth])}", flush=True)
    for nth in range(max(0, len(records) - 2), len(records)) if line else ():
        rec = records[nth]  # (one add_task per chat request: n = 1)
        if "first_token" not in rec:
            print(f"\nrequest {nth + 1}: no first token (not on the time line)")
            continue
        print(f"\nrequest {nth + 1} on the time line (ms from its add_task)\n"
              f"{stages.timeline_report(line, rec['first_token'] - rec['add_task'], nth)}",
              flush=True)


if __name__ == "__main__":
    main()
