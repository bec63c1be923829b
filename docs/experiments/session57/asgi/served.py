"""Session 57: where a chat request's time goes in the app before add_task, served over HTTP.

    PYTHONPATH=. uv run python docs/experiments/session57/asgi/served.py [N [PAUSE [count]]]
    (from the repo root)

A tiny-demo server (create_app, uvicorn, the prefix cache on) in this process; a client
process (httpx) sends N streamed chat requests of one 21-message conversation (max_tokens 1,
greedy), PAUSE s apart (default 0.01), after 10 unmeasured ones. Timestamps: the request's
arrival in the outermost ASGI wrapper (inside uvicorn), the chat handler's first line (its
``get_runtime`` call), ``parse_request``'s return, ``add_task``; and the event loop thread's CPU
time (``time.thread_time``) from arrival to the handler. Medians in ms."""
import cProfile
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

import server.api.routes.openai as routes
from server.api.app import create_app
from server.bench.chat import free_port, wait_until_served
from server.config import Settings

tmp = tempfile.TemporaryDirectory()
port = free_port()
app = create_app(Settings(demo="tiny", port=port, task_db_path=str(Path(tmp.name) / "t.db")),
                 freeze_heap=True)
rec = []
# a third argument "count": cProfile runs from arrival to the handler and the Python function
# calls there are printed (the times are then the profiler's, not the server's)
PROF = cProfile.Profile() if sys.argv[3:] == ["count"] else None


class Outer:
    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/v1/chat/completions":
            rec.append({"arrival": time.perf_counter(), "cpu0": time.thread_time()})
            if PROF is not None:
                PROF.enable()
        return await self.inner(scope, receive, send)


real_rt, real_parse = routes.get_runtime, routes.parse_request


def get_runtime(request):
    if rec:
        rec[-1].setdefault("handler", time.perf_counter())
        if "cpu1" not in rec[-1] and PROF is not None:
            PROF.disable()
        rec[-1].setdefault("cpu1", time.thread_time())
    return real_rt(request)


async def parse_request(*a, **k):
    out = await real_parse(*a, **k)
    rec[-1]["parsed"] = time.perf_counter()
    return out


routes.get_runtime, routes.parse_request = get_runtime, parse_request
server = uvicorn.Server(uvicorn.Config(Outer(app), host="127.0.0.1", port=port, log_config=None))
thread = threading.Thread(target=server.run, daemon=True)
thread.start()
url = f"http://127.0.0.1:{port}"
wait_until_served(url, seconds=600)
sched = app.state.runtime.scheduler
real_add = sched.add_task


def add_task(task):
    rec[-1]["add_task"] = time.perf_counter()
    return real_add(task)


sched.add_task = add_task
CLIENT = r"""
import sys, time, httpx
url, n, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
msgs = [{"role": "system", "content": "You are helpful. " * 20}]
for i in range(9):
    msgs += [{"role": "user", "content": f"question {i} " + "words here " * 60},
             {"role": "assistant", "content": "answer " * 30}]
msgs.append({"role": "user", "content": "final " * 60})
body = {"model": "rwkv", "messages": msgs, "max_tokens": 1, "stream": True, "temperature": 0}
client = httpx.Client(timeout=60)
for k in range(n):
    with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        for _ in r.iter_bytes():
            pass
    if k >= 10:
        time.sleep(pause)
"""
n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
pause = sys.argv[2] if len(sys.argv) > 2 else "0.01"  # s between requests
subprocess.run([sys.executable, "-c", CLIENT, url, str(n + 10), pause], check=True)
del rec[:10]


def med(a, b):
    return statistics.median((r[b] - r[a]) * 1e3 for r in rec if a in r and b in r)


print(f"event loop thread's CPU time from arrival to the handler: median "
      f"{med('cpu0', 'cpu1'):.3f} ms")
print(f"served, median of {len(rec)} requests (ms): arrival -> handler "
      f"{med('arrival', 'handler'):.3f}"
      f", handler -> body parsed {med('handler', 'parsed'):.3f}, parsed -> add_task "
      f"{med('parsed', 'add_task'):.3f}, arrival -> add_task {med('arrival', 'add_task'):.3f}")
if PROF is not None:
    print(f"Python function calls from arrival to the handler: "
          f"{pstats.Stats(PROF).total_calls / (len(rec) + 10):.0f} a request")
server.should_exit = True
thread.join(10)
