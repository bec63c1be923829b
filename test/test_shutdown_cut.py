"""Replies cut short by a server shutdown say so (session 31's QA): in process, the app's
``Drain`` begun directly (as run.py's server begins it on SIGTERM or Ctrl-C).

- An OpenAI stream sends the text generated so far, then ``{"error": {…,"code":
  "server_shutting_down"}}`` with no ``choices`` and closes: no ``finish_reason``, no ``[DONE]``
  (OPENAI_COMPAT 15), so a client cannot take the truncated reply for a whole one.
- A non-stream OpenAI request gets a 503 with ``Retry-After`` naming the cut (the SDKs retry
  it, OPENAI_COMPAT 13); one arriving while draining is refused the same way.
- A Task API stream sends an error event before ``[DONE]``; a persistent task stays finished,
  saved and continuable.
- Stops for other reasons (a client's ``/stop``) end as before, even while draining.

The OpenAI routes run on a scripted scheduler (``ScriptedScheduler``: a long fixed text, a few
tokens at a time); the Task API on the real one (tiny random model, CPU).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from contextlib import contextmanager

import httpx
import pytest
from openai_helpers import http, script, server  # noqa: F401 (fixtures)
from task_api_client import PROMPT, check_frames, text_of, wait_result

MSGS = [{"role": "user", "content": "Tell me a story."}]
SHUTDOWN = "The server is shutting down: this reply was cut short after {} tokens; retry it"


@pytest.fixture
def long_script(script):
    """The next OpenAI requests' tasks all produce a long text (~25 s unless stopped)."""
    return script("word " * 5000, per_pulse=1, delay=0.005)


@contextmanager
def draining(server):
    """The server's ``Drain``, cleared afterwards: the module's server serves the other tests."""
    drain = server.app.state.drain
    try:
        yield drain
    finally:  # on the server's loop, after a ``begin`` still on its way there (it sets the
        # event from the loop: cleared from this thread first, it stayed set for the next test)
        async def clear():
            drain.event.clear()

        asyncio.run_coroutine_threadsafe(clear(), drain._loop).result(10)


def _wait(cond, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _generating(tasks, n: int) -> bool:
    return len(tasks) == n and all(len(t.round_tokens()) >= 4 for t in tasks)


class Reader(threading.Thread):
    """One request in the background: its status, headers and ``data:`` payloads (a stream's,
    in order) or JSON body."""

    def __init__(self, url: str, method: str, path: str, body: dict | None = None):
        super().__init__(daemon=True)
        self.url, self.method, self.path, self.body = url, method, path, body
        self.status, self.headers, self.payloads, self.json = 0, {}, [], None
        self.first = threading.Event()  # the first data payload came

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as c:
            with c.stream(self.method, self.path, json=self.body) as r:
                self.status, self.headers = r.status_code, r.headers
                if not r.headers["content-type"].startswith("text/event-stream"):
                    self.json = json.loads(r.read())
                    return
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        self.payloads.append(line[6:])
                        self.first.set()

    def finish(self) -> None:
        self.join(15)
        assert not self.is_alive(), f"{self.path} did not end"


@pytest.mark.parametrize("path,n", [("/v1/chat/completions", 2), ("/v1/completions", 1)])
def test_a_stream_cut_by_the_shutdown_ends_with_an_error_event(server, long_script, path, n):
    """Every choice's text so far, then the error event naming the cut (no ``choices``), then
    the stream closes: no ``finish_reason`` chunk, no usage chunk, no ``[DONE]``."""
    chat = path.endswith("chat/completions")
    body = {"messages": MSGS} if chat else {"prompt": "Once"}
    body = {**body, "model": "rwkv-7", "max_tokens": 5000, "n": n, "stream": True,
            "stream_options": {"include_usage": True}}
    reader = Reader(server.url, "POST", path, body)
    with draining(server) as drain:
        reader.start()
        _wait(lambda: _generating(long_script.tasks, n), "the choices did not start generating")
        drain.begin()
        reader.finish()
    assert reader.status == 200 and all(t.is_finished for t in long_script.tasks)
    *chunks, last = reader.payloads
    tokens = sum(len(t.round_tokens()) for t in long_script.tasks)
    assert json.loads(last) == {"error": {"message": SHUTDOWN.format(tokens),
                                          "type": "server_error", "param": None,
                                          "code": "server_shutting_down"}}
    chunks = [json.loads(c) for c in chunks]  # ("[DONE]" would fail here)
    assert all(c["choices"] and c["usage"] is None for c in chunks)
    assert not any(ch["finish_reason"] for c in chunks for ch in c["choices"])
    for i, task in enumerate(long_script.tasks):  # the text generated so far all arrived first
        got = "".join(ch["delta"].get("content") or "" if chat else ch["text"]
                      for c in chunks for ch in c["choices"] if ch["index"] == i)
        text = server.runtime.loader.decode(task.round_tokens())
        assert got == (text.strip() if chat else text) and got.startswith("word word")


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_a_plain_request_cut_by_the_shutdown_is_a_503_to_retry(http, server, long_script, path):
    """A non-stream request in flight stops its task at once and answers 503 with
    ``Retry-After``, naming the cut (a 200 with the text so far and ``finish_reason: stop``
    passed the truncated reply as whole); one that comes after is refused the same way,
    before any task is queued."""
    body = {"messages": MSGS} if path.endswith("chat/completions") else {"prompt": "Once"}
    body = {**body, "model": "rwkv-7", "max_tokens": 5000}
    reader = Reader(server.url, "POST", path, body)
    with draining(server) as drain:
        reader.start()
        _wait(lambda: _generating(long_script.tasks, 1), "the request did not start generating")
        t0 = time.monotonic()
        drain.begin()
        reader.finish()
        assert time.monotonic() - t0 < 5
        (task,) = long_script.tasks
        assert task.is_finished and task.finish_reason == "abort"
        assert reader.status == 503 and reader.headers["retry-after"] == "1"
        assert reader.json == {"error": {"message": SHUTDOWN.format(len(task.round_tokens())),
                                         "type": "server_error", "param": None,
                                         "code": "server_shutting_down"}}
        late = http.post(path, json=body)
        assert late.status_code == 503 and late.headers["retry-after"] == "1"
        assert late.json()["error"] == {"message": "The server is shutting down; retry shortly.",
                                         "type": "server_error", "param": None,
                                         "code": "server_shutting_down"}
        assert len(long_script.tasks) == 1  # refused before any task was queued


def _task_error(task_id: str, message: str) -> dict:
    return {"error": {"message": message, "type": "server_error", "param": None,
                      "code": "server_shutting_down"}, "task_id": task_id}


def test_a_task_stream_cut_by_the_shutdown_says_so_before_done(http, server):
    """``/create`` and ``/tmp`` streams and a ``/{id}/stream`` reader: the text so far, an
    error event saying the shutdown stopped the task (a persistent one: saved, continuable),
    ``[DONE]``. The persistent task stays finished with that text and is continued after."""
    body = {"prompt": PROMPT, "max_tokens": 40000, "stream": True}
    created = Reader(server.url, "POST", "/v1/tasks/create", body)
    tmp = Reader(server.url, "POST", "/v1/tasks/tmp", body)
    quiet = http.post("/v1/tasks/create", json={**body, "stream": False}).json()["task_id"]
    follower = Reader(server.url, "GET", f"/v1/tasks/{quiet}/stream")
    readers = [created, tmp, follower]
    with draining(server) as drain:
        for r in readers:
            r.start()
        for r in readers:
            assert r.first.wait(30)
        _wait(lambda: all(len(r.payloads) >= 3 for r in readers), "no text streamed")
        drain.begin()
        for r in readers:
            r.finish()
    for r in readers:
        assert r.status == 200
        *events, error, done = r.payloads
        assert done == "[DONE]"
        frames = check_frames(events + [done])
        tid = frames[0]["task_id"]
        kept = wait_result(http, tid)
        n = http.get(f"/v1/tasks/{tid}/status").json()["generated_buf"]
        assert kept["finished"] and kept["result"] == text_of(frames) and n > 0
        if r is tmp:
            message = (f"The server is shutting down: temporary task {tid} was stopped after "
                       f"{n} tokens and is not kept; retry it once the server is back")
        else:
            message = (f"The server is shutting down: task {tid} was stopped after {n} tokens; "
                       f"its tokens so far are saved: continue it (POST /v1/tasks/{tid}/"
                       "continue) once the server is back")
        assert json.loads(error) == _task_error(tid, message)
    tid = check_frames(created.payloads[:-2] + ["[DONE]"])[0]["task_id"]
    r = http.post(f"/v1/tasks/{tid}/continue", json={"prompt": "\n\nUser: go on", "max_tokens": 4})
    assert r.status_code == 200 and wait_result(http, tid)["finished"]


def test_a_task_stream_a_client_stopped_ends_as_before_while_draining(http, server):
    """Only stops the shutdown caused are reported: a task the client stopped (``/stop``)
    just before the drain reached it ends its stream with ``[DONE]`` and no error."""
    reader = Reader(server.url, "POST", "/v1/tasks/create",
                    {"prompt": PROMPT, "max_tokens": 40000, "stream": True})
    with draining(server) as drain:
        reader.start()
        assert reader.first.wait(30)
        tid = json.loads(reader.payloads[0])["task_id"]
        assert http.post(f"/v1/tasks/{tid}/stop").status_code == 200
        drain.begin()
        reader.finish()
    frames = check_frames(reader.payloads)  # no error event
    assert wait_result(http, tid)["result"] == text_of(frames)


def _ids(http) -> set[str]:
    listed = http.get("/v1/tasks/list").json()
    return set(listed["cpu_tasks"]) | set(listed["db_tasks"])


def test_task_api_work_is_refused_while_draining(http, server):
    """Every Task API route that starts work answers 503 with ``Retry-After`` while draining,
    naming the shutdown, and starts nothing: no task is created, a fork keeps no copy, a
    continued task keeps its last round. They were accepted, and the new task stopped at once
    (session 31's note). Reading routes still answer; after the drain work is taken again."""
    done = http.post("/v1/tasks/create", json={"prompt": PROMPT, "max_tokens": 3}).json()
    tid = done["task_id"]
    before = wait_result(http, tid)
    listed = _ids(http)
    create = {"prompt": PROMPT, "max_tokens": 3}
    work = [("/v1/tasks/tmp", create), ("/v1/tasks/create", create),
            ("/v1/tasks/create", {**create, "stream": True}),
            ("/v1/tasks/fim", {"prefix": "def f(", "suffix": "):", "max_tokens": 3}),
            (f"/v1/tasks/{tid}/fork", {"prompt": " more", "max_tokens": 3}),
            (f"/v1/tasks/{tid}/continue", {"prompt": " more", "max_tokens": 3})]
    with draining(server) as drain:
        drain.begin()
        _wait(lambda: drain.draining, "the drain did not begin")
        for path, body in work:
            r = http.post(path, json=body)
            assert r.status_code == 503, (path, r.status_code, r.text)
            assert r.headers["retry-after"] == "1"
            assert r.json() == {"detail": "The server is shutting down; retry shortly"}
        assert wait_result(http, tid) == before  # reading still works; the task unchanged
    assert _ids(http) == listed
    r = http.post(f"/v1/tasks/{tid}/continue", json={"prompt": " more", "max_tokens": 3})
    assert r.status_code == 200 and wait_result(http, tid)["finished"]


def test_the_drain_marks_only_the_rounds_it_stops():
    """``Drain.cut_short``: true for a task the drain stopped that then finished "abort" in
    that round; not for one already asked to stop, one that ended on its own, or a later round."""
    import asyncio

    from server.api.stopping import Drain
    from server.task.task import Task

    async def main():
        drain = Drain()
        cut, asked, ended = Task(prompt=[1]), Task(prompt=[1]), Task(prompt=[1])
        asked.stop()
        drain.stop([cut, asked, ended])
        for t in (cut, asked):
            t._finish("abort")
        ended._finish("length")
        assert [drain.cut_short(t) for t in (cut, asked, ended)] == [True, False, False]
        cut.continue_gen([2])  # its next round (a continue): not the one the drain cut
        cut._finish("abort")
        assert not drain.cut_short(cut)

    asyncio.run(main())



LONG_PROMPT = list(range(1, 200)) * 500  # ~100k tokens: seconds of prefill on the tiny model


def _memory_ids(http) -> set:
    return {t if isinstance(t, str) else t.get("task_id")
            for t in http.get("/v1/tasks/list").json()["cpu_tasks"]}


def _new_task_id(http, before: set) -> str:
    """The id of the task that appeared in memory since ``before`` (a create's, in flight)."""
    found: list[str] = []

    def appeared() -> bool:
        found[:] = sorted(_memory_ids(http) - before)
        return bool(found)
    _wait(appeared, "the create's task did not appear")
    return found[0]


def test_a_prefill_only_request_cut_by_the_shutdown_is_a_503_at_once(http, server):
    """A ``max_tokens: 0`` create waiting for a long prefill: the shutdown stops it and the
    reply is a 503 with ``Retry-After`` at once, the task (never given out) dropped (it
    waited out uvicorn's 10 s, then a plain-text 500, and the half-prefilled task was stored;
    session 70's QA). A continue's prefill cut the same way keeps its task and the prompt
    tokens not yet fed, says so (no ``Retry-After``: sent again, the prompt would be appended
    twice), and a continue without a prompt feeds the rest once the server is back."""
    long = LONG_PROMPT
    before = _memory_ids(http)
    created = Reader(server.url, "POST", "/v1/tasks/create", {"prompt": long, "max_tokens": 0})
    with draining(server) as drain:
        created.start()
        tid = _new_task_id(http, before)
        time.sleep(0.3)  # (in its prefill)
        t0 = time.monotonic()
        drain.begin()
        created.finish()
        assert time.monotonic() - t0 < 5
    assert created.status == 503 and created.headers["retry-after"] == "1"
    assert created.json == {"detail": "The server is shutting down; retry shortly"}
    assert http.get(f"/v1/tasks/{tid}/status").status_code == 404
    base = http.post("/v1/tasks/create", json={"prompt": PROMPT, "max_tokens": 0}).json()
    tid = base["task_id"]
    resumed = Reader(server.url, "POST", f"/v1/tasks/{tid}/continue",
                     {"prompt": long, "max_tokens": 0})
    with draining(server) as drain:
        resumed.start()
        _wait(lambda: http.get(f"/v1/tasks/{tid}/status").json()["status"] != 3,
              "the continue did not start")
        time.sleep(0.3)
        drain.begin()
        resumed.finish()
    assert resumed.status == 503 and "retry-after" not in resumed.headers
    detail = resumed.json["detail"]
    assert detail.startswith(f"The server is shutting down: {tid}'s prefill stopped with ")
    assert detail.endswith("prompt tokens still to feed; the task keeps them: continue it "
                           "without a prompt once the server is back")
    left = int(detail.split(" stopped with ")[1].split()[0])
    assert 0 < left < len(long)
    r = http.post(f"/v1/tasks/{tid}/continue", json={"max_tokens": 0})
    assert r.status_code == 200 and r.json()["finished"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/tasks/create"])
def test_a_body_still_arriving_when_the_shutdown_begins_is_a_503_at_once(server, path):
    """An upload under way (here: half its bytes sent, then nothing) when the shutdown
    begins: a 503 with Retry-After in the route's error shape at once (it waited out
    uvicorn's 10 s, then was a plain-text 500; session 70's QA). A request whose body is in
    is not touched by it (the other tests here)."""
    import socket
    from urllib.parse import urlparse

    u = urlparse(server.url)
    body = json.dumps({"prompt": "x" * 2000, "max_tokens": 1}).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {u.hostname}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with draining(server) as drain, socket.create_connection((u.hostname, u.port), 10) as s:
        s.sendall(head + body[:1000])
        time.sleep(0.3)
        t0 = time.monotonic()
        drain.begin()
        s.settimeout(5)
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith((b"}", b"]")):
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
        assert time.monotonic() - t0 < 3
    head_text, _, payload = reply.partition(b"\r\n\r\n")
    lines = head_text.decode().lower().split("\r\n")
    assert lines[0].startswith("http/1.1 503"), reply
    assert "retry-after: 1" in lines
    message = "The server is shutting down; retry shortly"
    if path.startswith("/v1/tasks"):
        assert json.loads(payload) == {"detail": message}
    else:
        assert json.loads(payload) == {"error": {"message": message, "type": "server_error",
                                                 "param": None, "code": "server_shutting_down"}}


@pytest.mark.parametrize("how", ["tmp", "fork"])
def test_a_prefill_only_temporary_task_whose_client_left_is_stopped_and_dropped(http, server,
                                                                               how):
    """A ``max_tokens: 0`` ``/tmp`` request (or ``fork?tmp=true`` of a task) whose client
    gives up before the prefill ends: the task is stopped and dropped (its id was never given
    out; it prefilled on to the end for nobody, holding a slot: session 70's QA)."""
    path = "/v1/tasks/tmp"
    if how == "fork":
        source = http.post("/v1/tasks/create", json={"prompt": "Hi", "max_tokens": 0})
        path = f"/v1/tasks/{source.json()['task_id']}/fork?tmp=true"
    before = _memory_ids(http)
    outcome = []

    def impatient():
        with httpx.Client(base_url=server.url, timeout=1.5) as c:
            try:
                c.post(path, json={"prompt": LONG_PROMPT, "max_tokens": 0})
            except httpx.ReadTimeout as e:
                outcome.append(e)
    client = threading.Thread(target=impatient, daemon=True)
    client.start()
    tid = _new_task_id(http, before)  # (listed while its request waits)
    client.join(10)
    assert outcome and not client.is_alive()  # the client gave up before the prefill ended
    t0 = time.monotonic()
    _wait(lambda: http.get(f"/v1/tasks/{tid}/status").status_code == 404,
          "the temporary task was not dropped", timeout=5)
    assert time.monotonic() - t0 < 5
