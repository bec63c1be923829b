"""Locust load test: streamed generation through POST /v1/tasks/tmp (temporary tasks).

    locust -f test/locustfile.py --host=http://localhost:8000                 # Web UI
    locust -f test/locustfile.py --host=http://localhost:8000 --headless \
        -u 16 -r 4 --run-time 15s --csv=perf_report                         # headless

Besides the HTTP request itself, every stream records two "SSE" metrics:
  ttft    time to the first frame carrying text (ms)
  stream  whole stream, request sent to `data: [DONE]` (ms); failures (non-200, an error frame,
          no [DONE], a broken connection) are recorded here with the reason.
Environment: RWKV_LOCUST_MAX_TOKENS (default 200), RWKV_LOCUST_TEMPERATURE (1.0),
RWKV_LOCUST_CHAT_WEIGHT (0; > 0 adds streamed /v1/chat/completions requests with that weight
against weight 1 for /v1/tasks/tmp), RWKV_API_KEY (sent as a bearer key when set).
"""
from __future__ import annotations

import os
import random
import sys

import requests
from locust import HttpUser, between

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import StreamMeter, request_for  # noqa: E402

MAX_TOKENS = int(os.environ.get("RWKV_LOCUST_MAX_TOKENS", "200"))
TEMPERATURE = float(os.environ.get("RWKV_LOCUST_TEMPERATURE", "1.0"))
CHAT_WEIGHT = int(os.environ.get("RWKV_LOCUST_CHAT_WEIGHT", "0"))
API_KEY = os.environ.get("RWKV_API_KEY")


def stream_request(user: HttpUser, api: str) -> None:
    """Send one streamed request for `api` ("tasks"/"openai") and record its SSE metrics."""
    path, body = request_for(api, random.randrange(1 << 16), MAX_TOKENS, TEMPERATURE)
    headers = {"Authorization": f"Bearer {API_KEY}"} if API_KEY else {}
    meter = StreamMeter(api)
    status = 0
    try:
        with user.client.post(path, json=body, headers=headers, stream=True,
                              catch_response=True, name=f"POST {path}") as resp:
            status = resp.status_code
            if status == 200:
                resp.success()
                for raw in resp.iter_lines(chunk_size=1024):
                    meter.feed(raw.decode("utf-8", errors="replace"))
            else:  # (status 0: no response at all; locust keeps why in ``error``)
                why = resp.text[:200] if status else repr(getattr(resp, "error", None))
                meter.error = f"HTTP {status}: {why}"
                resp.failure(meter.error)
    except requests.RequestException as exc:
        meter.error = f"{type(exc).__name__}: {exc}"
    meter.finish(status)
    report(user, api, meter)


def report(user: HttpUser, api: str, meter: StreamMeter) -> None:
    """Fire the `ttft` and `stream` request events of one finished stream."""
    fire = user.environment.events.request.fire
    suffix = "" if api == "tasks" else " (chat)"
    if meter.ttft is not None:
        fire(request_type="SSE", name="ttft" + suffix, response_time=meter.ttft * 1000,
             response_length=0, exception=None, context={})
    exc = None if meter.ok else RuntimeError(meter.error)
    fire(request_type="SSE", name="stream" + suffix, response_time=meter.latency * 1000,
         response_length=meter.text_bytes, exception=exc, context={})


def tasks_stream(user: HttpUser) -> None:
    """POST /v1/tasks/tmp with stream=true."""
    stream_request(user, "tasks")


def chat_stream(user: HttpUser) -> None:
    """POST /v1/chat/completions with stream=true."""
    stream_request(user, "openai")


class RWKVStreamUser(HttpUser):
    """A client that streams one generation after another."""
    wait_time = between(0.05, 0.2)
    tasks = {tasks_stream: 1, **({chat_stream: CHAT_WEIGHT} if CHAT_WEIGHT > 0 else {})}
