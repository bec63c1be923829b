"""Session 57: the same app's ASGI stack from the outermost call to the chat handler's first line,
called in a tight loop on one event loop (no sockets, no scheduler work between calls): the
stack's warm cost.

    PYTHONPATH=. uv run python docs/experiments/session57/asgi/tight.py [N]   (from the repo root)

The handler is stopped at its first line (``get_runtime`` raises), so the error path runs after
it; only the time up to the handler is kept. Median of N calls in µs, after 200 unmeasured; then
the Python function calls of one call (cProfile over 200, the error path included)."""
import asyncio
import cProfile
import pstats
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import server.api.routes.openai as routes
from server.api.app import create_app
from server.config import Settings
from server.logger import get_logger

tmp = tempfile.TemporaryDirectory()
app = create_app(Settings(demo="tiny", task_db_path=str(Path(tmp.name) / "t.db")))
reached = {}


class Stop(Exception):
    pass


def get_runtime(request):
    reached["t"] = time.perf_counter()
    raise Stop()


routes.get_runtime = get_runtime
body = json.dumps({"model": "rwkv", "messages": [{"role": "user", "content": "hi"}]}).encode()
scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
         "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
         "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
         "server": ("127.0.0.1", 8000),
         "headers": [(b"host", b"x"), (b"content-type", b"application/json"),
                     (b"content-length", str(len(body)).encode())]}


async def calls(n, prof=None):
    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        pass

    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        if prof is not None:
            prof.enable()
        try:
            await app(dict(scope), receive, send)
        except Stop:
            pass
        if prof is not None:
            prof.disable()
        out.append((reached["t"] - t0) * 1e6)
    return statistics.median(out)


async def main(n):
    startup, sent = asyncio.Queue(), asyncio.Queue()
    await startup.put({"type": "lifespan.startup"})

    async def snd(m):
        await sent.put(m)

    life = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}},
                                   startup.get, snd))
    assert (await sent.get())["type"] == "lifespan.startup.complete"
    get_logger("api").remove()  # (each stopped call logs its error with a traceback)
    await calls(200)
    print(f"tight loop, median of {n} calls: ASGI entry -> chat handler {await calls(n):.1f} us")
    prof = cProfile.Profile()
    await calls(200, prof)  # (the error path after the handler counts too: an upper bound)
    print(f"Python function calls a call (cProfile, to the handler and its error path): "
          f"{pstats.Stats(prof).total_calls / 200:.0f}")
    await startup.put({"type": "lifespan.shutdown"})
    await sent.get()
    await life


asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
