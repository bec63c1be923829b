"""Helpers for the OpenAI API tests: an in-process uvicorn server, SSE parsing, a scripted scheduler."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import openai
import pytest
import uvicorn

from server.scheduler import QueueFull
from server.task.task import Status


class LiveServer:
    """``create_app(settings)`` served by a real uvicorn on a free loopback port, in a thread.

    In-process so tests can reach the runtime (``.runtime``) to swap in a scripted scheduler.
    """

    def __init__(self, settings):
        from server.api.app import create_app

        self.app = create_app(settings)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning",
                                lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.time() + 60
        while not self.server.started:
            if time.time() > deadline or not self.thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    @property
    def runtime(self):
        return self.app.state.runtime


@pytest.fixture(scope="module")
def server(tiny_model_path, tmp_path_factory):
    """For modules that import it (with ``script``): a ``LiveServer`` on the tiny checkpoint
    (CPU, its own database, no API key, direct chat answers), one per module."""
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu",
                        task_db_path=str(tmp_path_factory.mktemp("db") / "tasks.db"),
                        api_key=None, chat_think=False, verbose=False)
    with LiveServer(settings) as srv:
        yield srv


@pytest.fixture
def script(server, tiny_loader, monkeypatch):
    """``script(text, **kw)``: the next OpenAI requests' tasks all produce ``text``
    (``ScriptedScheduler``; the Task API keeps the real scheduler)."""
    def install(text: str, **kw) -> ScriptedScheduler:
        fake = ScriptedScheduler(tiny_loader, text, **kw)
        monkeypatch.setattr(server.runtime, "scheduler", fake)
        return fake
    return install


@pytest.fixture(scope="module")
def sdk(server):
    """The official client on the module's ``server`` (no retries: errors surface at once)."""
    return openai.OpenAI(base_url=server.url + "/v1", api_key="sk-local", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def sse_lines(response: httpx.Response) -> tuple[str, list[str]]:
    """The raw body of an SSE reply and its ``data:`` payloads, checking the framing."""
    raw = response.read().decode()
    assert "\r" not in raw
    events = [e for e in raw.split("\n\n") if e]
    payloads = []
    for event in events:
        lines = event.split("\n")
        assert all(line.startswith(("data: ", ":")) for line in lines), event  # no event: lines
        data = [line[len("data: "):] for line in lines if line.startswith("data: ")]
        assert len(data) <= 1, event  # one-line JSON per event
        payloads += data
    assert raw.endswith("data: [DONE]\n\n") or '"error"' in payloads[-1]
    return raw, payloads


def stream_chunks(client: httpx.Client, path: str, body: dict) -> list[dict]:
    """POST a streaming request; the JSON chunks before ``[DONE]`` (which must come last, once)."""
    with client.stream("POST", path, json={**body, "stream": True}) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        assert "content-encoding" not in r.headers
        _, payloads = sse_lines(r)
    assert payloads.count("[DONE]") == 1 and payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


def scripted_logprob(i: int, top: int) -> tuple:
    """The log probabilities ``ScriptedScheduler`` gives output token ``i``: -i/10, with
    ``top`` alternatives (token 0, 1, ...) below it."""
    return (-i / 10, list(range(top)), [-i / 10 - t - 1 for t in range(top)])


class ScriptedScheduler:
    """Stands in for the scheduler: every task "generates" ``text`` then finishes with ``reason``.

    The text is tokenized with the real tokenizer and handed out a few tokens per "pulse" from a
    thread, as the real scheduler does, so the OpenAI layer sees exactly this model output.
    """

    def __init__(self, loader, text: str, reason: str = "stop", error: str | None = None,
                 capacity: int = 1 << 30, per_pulse: int = 2, delay: float = 0.002):
        self.tokens = loader.encode(text)
        self.reason, self.error, self.capacity = reason, error, capacity  # capacity: QueueFull after
        self.per_pulse, self.delay = per_pulse, delay
        self.max_queue = self.max_in_flight = 1 << 30  # (the API refuses more choices than
        self.max_batch_size = 1  # max_in_flight at once)
        self.tasks = []

    def check_room(self, n: int = 1) -> None:
        if len(self.tasks) + n > self.capacity:
            raise QueueFull(f"{len(self.tasks)} tasks are waiting (capacity {self.capacity})")

    def warm_prefix(self, origin: str, tokens: list[int]) -> None:
        """The real scheduler's next-turn job (a chat reply's history computed ahead): nothing
        to compute here (its absence was logged as a failed ``on_finish`` in every scripted
        chat)."""

    def add_task(self, task) -> None:
        if len(self.tasks) >= self.capacity:
            raise QueueFull("4096 tasks are waiting (max_queue=4096)")
        self.tasks.append(task)
        threading.Thread(target=self._run, args=(task,), daemon=True).start()

    def _run(self, task) -> None:
        task.status = Status.RUNNING
        task._under_way()  # as a scheduler once the task's first pass is queued
        unfed = task.unfed()  # its prompt "fed" but the last token, the current one; each
        task.history.extend(unfed[:-1])  # token after it as a decode step feeds it
        task.pending, task.current_token = [], unfed[-1] if unfed else None
        toks = self.tokens[: task.max_tokens]
        for i in range(0, len(toks), self.per_pulse):
            if task.stop_requested:
                return task._finish("abort")
            part = toks[i: i + self.per_pulse]
            task.history.extend(task.unfed() + part[:-1])
            task.current_token = part[-1]
            task._append_output(part, None if task.logprobs is None else
                                [scripted_logprob(i + j, task.logprobs)
                                 for j in range(len(part))])
            time.sleep(self.delay)
        reason = "length" if len(self.tokens) > task.max_tokens else self.reason
        if reason == "stop" and task.current_token is not None:  # (end of text: fed, as the
            task.history.append(task.current_token)  # scheduler feeds the last token then)
            task.current_token = None
        task._finish(reason, self.error)
