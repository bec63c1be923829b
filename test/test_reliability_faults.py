"""Faults inside (issue 6 §4): an exception in the scheduler fails only the tasks it holds in its
slots, their clients are told (SSE error event, 500 with a message), queued tasks run normally
afterwards and the server goes on serving. Bad requests (unknown template, token ids outside the
vocabulary, empty prompts) get 4xx, never a crash.

Faults are injected into a real server run in-process (``LiveServer``: uvicorn in a thread, the
real runtime): a one-shot wrapper around a ``BatchEngine`` method raises on its next call.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from openai_helpers import LiveServer
from reliability_clients import StreamReader, chat_body, check_task_stream, task_body
from task_api_client import wait_result

LONG = 40000
GREEDY = {"temperature": 0, "top_k": 0, "top_p": 1, "presence_penalty": 0}
FAULT = "injected fault"


@pytest.fixture(scope="module")
def live(tiny_model_path, tmp_path_factory):
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", max_batch_size=2,
                        buffer_size=8, task_db_path=str(tmp_path_factory.mktemp("db") / "t.db"),
                        api_key=None, verbose=False)
    with LiveServer(settings) as srv:
        yield srv


@pytest.fixture
def http(live):
    with httpx.Client(base_url=live.url, timeout=30) as c:
        yield c


class OneShotFault:
    """Wraps ``obj.name``: once armed, the next call raises ``RuntimeError(FAULT)``."""

    def __init__(self, obj, name: str):
        self.obj, self.name, self.orig = obj, name, getattr(obj, name)
        self.armed, self.fired = False, 0
        setattr(obj, name, self)

    def __call__(self, *args, **kwargs):
        if self.armed:
            self.armed = False
            self.fired += 1
            raise RuntimeError(FAULT)
        return self.orig(*args, **kwargs)

    def remove(self) -> None:
        setattr(self.obj, self.name, self.orig)


@pytest.fixture
def inject(live):
    faults = []

    def make(name: str) -> OneShotFault:
        faults.append(OneShotFault(live.runtime.scheduler.engine, name))
        return faults[-1]

    yield make
    for f in reversed(faults):
        f.remove()


def _wait(http, pred, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred(http.get("/health").json()):
        assert time.monotonic() < deadline, http.get("/health").json()
        time.sleep(0.01)


def _error_message(event) -> str:
    return event["error"]["message"] if isinstance(event, dict) and "error" in event else ""


def test_pulse_fault_fails_only_the_tasks_in_slots(live, http, inject):
    _wait(http, lambda h: h["active"] == 0 and h["queue"] == 0)
    chat = StreamReader(live.url, "/v1/chat/completions", chat_body(LONG))
    tmp = StreamReader(live.url, "/v1/tasks/tmp", task_body(LONG))
    for reader in (chat, tmp):
        reader.start()
        assert reader.started.wait(30)
    _wait(http, lambda h: h["active"] == 2)
    # queued behind the two running streams: not in the faulted pulse
    queued = http.post("/v1/tasks/create", json=task_body(12, **GREEDY)).json()["task_id"]
    _wait(http, lambda h: h["queue"] == 1)
    fault = inject("pulse")
    fault.armed = True
    for reader in (chat, tmp):
        reader.join(30)
        assert not reader.is_alive(), "a client of a failed task was left hanging"
    assert fault.fired == 1
    # OpenAI stream: an error event, no choices, then the stream closes (OPENAI_COMPAT case 15)
    assert FAULT in _error_message(chat.events[-1]) and "[DONE]" not in chat.events
    # Task API stream: an error event, then [DONE]
    assert tmp.events[-1] == "[DONE]" and FAULT in _error_message(tmp.events[-2])
    tid = tmp.events[0]["task_id"]
    r = http.get(f"/v1/tasks/{tid}/get_result")
    assert r.status_code == 500 and FAULT in r.json()["detail"]
    # the queued task ran normally, and exactly as it does without any fault (each awaited by
    # its own result: /health's counts show no task between a slot's release and its finish)
    res = wait_result(http, queued)
    again = http.post("/v1/tasks/create", json=task_body(12, **GREEDY)).json()["task_id"]
    assert res["result"] == wait_result(http, again)["result"]
    assert http.get("/health").json()["scheduler_alive"]


def test_non_stream_clients_get_500_with_a_message(live, http, inject):
    _wait(http, lambda h: h["active"] == 0 and h["queue"] == 0)
    results = {}

    def call(name, path, body):
        results[name] = httpx.post(live.url + path, json=body, timeout=60)

    tid = http.post("/v1/tasks/create", json=task_body(LONG)).json()["task_id"]
    t = threading.Thread(target=call, args=("chat", "/v1/chat/completions", chat_body(LONG)))
    t.start()
    _wait(http, lambda h: h["active"] == 2)
    inject("pulse").armed = True
    t.join(30)
    assert not t.is_alive()
    r = results["chat"]
    assert r.status_code == 500 and FAULT in r.json()["error"]["message"]
    r = http.get(f"/v1/tasks/{tid}/get_result")
    assert r.status_code == 500 and FAULT in r.json()["detail"]
    assert http.post("/v1/chat/completions", json=chat_body(4)).status_code == 200


@pytest.mark.parametrize("where", ["load", "prefill"])
def test_fault_while_admitting_or_prefilling_is_reported_and_rerunnable(live, http, inject,
                                                                         where):
    """A fault before decoding (loading a task into its slot, feeding its prompt) is reported to
    the client too — never a request left waiting forever — and leaves the task as it was before
    it was admitted: continuing it later gives exactly a fresh run's output."""
    _wait(http, lambda h: h["active"] == 0 and h["queue"] == 0)
    inject(where).armed = True
    nonce = f"{where} {time.time()}"  # a prompt no prefix cache holds: the prefill really runs
    body = {**task_body(10, **GREEDY), "prompt": f"User: {nonce}\n\nAssistant:"}
    chat = {**chat_body(4), "messages": [{"role": "user", "content": nonce}]}
    r = httpx.post(live.url + "/v1/chat/completions", json=chat, timeout=30)
    assert r.status_code == 500 and FAULT in r.json()["error"]["message"]
    inject(where).armed = True
    tid = http.post("/v1/tasks/create", json=body).json()["task_id"]
    _wait(http, lambda h: h["active"] == 0 and h["queue"] == 0)
    failed = http.get(f"/v1/tasks/{tid}/get_result")
    assert failed.status_code == 500 and FAULT in failed.json()["detail"]
    assert http.post(f"/v1/tasks/{tid}/continue").status_code == 200
    fresh = http.post("/v1/tasks/create", json=body).json()["task_id"]
    _wait(http, lambda h: h["active"] == 0 and h["queue"] == 0)
    texts = [http.get(f"/v1/tasks/{i}/get_result").json()["result"] for i in (tid, fresh)]
    assert texts[0] and texts[0] == texts[1]


# ---- bad requests: 4xx, never a crash --------------------------------------------------------------
@pytest.mark.parametrize("method,path,body,status", [
    ("POST", "/v1/tasks/_TMPL_" + "0" * 32 + "/fork", {"prompt": "x"}, 404),
    ("POST", "/v1/tasks/_nope/continue", {"prompt": "x"}, 404),
    ("POST", "/v1/chat/completions", {**chat_body(2), "model": "rwkv-7:_nope"}, 404),
    ("POST", "/v1/completions", {"prompt": "x", "model": "rwkv-7:_nope"}, 404),
    ("POST", "/v1/tasks/tmp", {"prompt": [1, 65536]}, 422),
    ("POST", "/v1/tasks/create", {"prompt": [-1]}, 422),
    ("POST", "/v1/tasks/tmp", {"prompt": [2**63]}, 422),
    ("POST", "/v1/completions", {"prompt": [1, 65536]}, 400),
    ("POST", "/v1/completions", {"prompt": [[5], [-3]]}, 400),
    ("POST", "/v1/tasks/tmp", {"prompt": ""}, 422),
    ("POST", "/v1/tasks/create", {"prompt": []}, 422),
    ("POST", "/v1/tasks/fim", {"prefix": "", "suffix": ""}, 422),
    ("POST", "/v1/completions", {"prompt": []}, 400),
    ("POST", "/v1/chat/completions", {"messages": None}, 400),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                      "top_k": 10**20}, 400),
])
def test_bad_requests_are_4xx(live, http, method, path, body, status):
    r = http.request(method, path, json=body)
    assert r.status_code == status, r.text
    assert "detail" in r.json() or "message" in r.json()["error"]
    assert http.get("/health").json()["scheduler_alive"]


def test_still_serving_after_everything(live, http):
    assert live.thread.is_alive() and live.runtime.scheduler._thread.is_alive()
    r = http.post("/v1/tasks/tmp", json=task_body(4, stream=True))
    events = [ln[6:] for ln in r.text.splitlines() if ln.startswith("data: ")]
    assert check_task_stream([e if e == "[DONE]" else json.loads(e) for e in events]) == ""
