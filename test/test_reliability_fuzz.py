"""Bad input everywhere (issue 6 §6): schemathesis over the app's own OpenAPI schema, every route,
and hand-picked Unicode edge cases (lone surrogates, NUL, 1 MB strings) in prompts and stop strings.

The server is a real ``python run.py`` on the tiny random checkpoint, with generation capped at a
few tokens so fuzzed requests stay quick. Every reply must be < 500 and arrive within a timeout;
routes taking a task id are fuzzed both with generated ids and with ids of real tasks.
``RWKV_FUZZ_EXAMPLES`` (default 40 per route and mode) scales the run; examples are derandomized so
CI runs are reproducible.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

EXAMPLES = int(os.environ.get("RWKV_FUZZ_EXAMPLES", "40"))
REQUEST_TIMEOUT_S = 30  # a reply slower than this counts as a hang
STATUSES: Counter = Counter()  # replies seen by the fuzzer, by status (printed at the end)
FUZZ_ENV = {"RWKV_MAX_TOKENS_CAP": "4", "RWKV_MAX_PROMPT_TOKENS": "512",
            "RWKV_DEFAULT_MAX_TOKENS": "4", "RWKV_MAX_BATCH_SIZE": "16"}


def _cases() -> list[tuple[str, GenerationMode]]:
    """``(METHOD /path, mode)`` for every operation in the app's schema (built without loading a
    model): valid data everywhere, invalid data where there is input to get wrong."""
    from server.api.app import create_app
    from server.config import Settings

    schema = create_app(Settings(device="cpu")).openapi()
    out = []
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            label = f"{method.upper()} {path}"
            out.append((label, GenerationMode.POSITIVE))
            typed = [p for p in op.get("parameters", []) if p["schema"].get("type") != "string"]
            if typed or op.get("requestBody"):  # a string path parameter cannot be invalid
                out.append((label, GenerationMode.NEGATIVE))
    return out


@pytest.fixture(scope="module")
def fuzz_server(start_server):
    srv = start_server(**FUZZ_ENV)
    yield srv
    srv.stop()  # free its memory for the rest of the session


@pytest.fixture(scope="module")
def schema(fuzz_server):
    raw = httpx.get(fuzz_server.url + "/openapi.json", timeout=30).json()
    return schemathesis.openapi.from_dict(raw)


class RealIds:
    """Ids of a finished persistent task and of a template, recreated when fuzzing deleted them."""

    def __init__(self, url: str):
        self.http = httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S)
        self.ids: dict[str, str] = {}

    def get(self, kind: str) -> str:
        tid = self.ids.get(kind)
        if tid is None or self.http.get(f"/v1/tasks/{tid}/status").status_code == 404:
            body = {"prompt": "User: hi\n\nAssistant:", "max_tokens": 0 if kind == "template" else 2}
            tid = self.http.post("/v1/tasks/create", json=body).json()["task_id"]
            if kind == "template":
                tid = self.http.post(f"/v1/tasks/{tid}/as_template").json()["task_id"]
            self.ids[kind] = tid
        return tid


def _check_reply(r, label: str) -> None:
    STATUSES[r.status_code] += 1
    assert r.status_code < 500, f"{label}: {r.status_code} {r.text[:500]}"
    if r.status_code >= 400 and r.status_code != 405:
        body = r.json()  # every refusal is JSON: {"detail": ...} or OpenAI's {"error": {...}}
        assert "detail" in body or set(body["error"]) >= {"message", "type"}, body


@pytest.mark.parametrize("label,mode", _cases(), ids=lambda x: getattr(x, "value", x))
def test_fuzz_every_route(schema, fuzz_server, label, mode):
    op = schema.find_operation_by_label(label)
    assert op is not None, f"{label} missing from the served schema"
    real = RealIds(fuzz_server.url)
    counter = {"n": 0}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case):
        counter["n"] += 1
        if "task_id" in (case.path_parameters or {}) and counter["n"] % 2:
            case.path_parameters = {**case.path_parameters,
                                    "task_id": real.get("template" if counter["n"] % 4 == 1
                                                        else "task")}
        r = case.call(base_url=fuzz_server.url, timeout=REQUEST_TIMEOUT_S)
        _check_reply(r, label)

    run()
    assert httpx.get(fuzz_server.url + "/health", timeout=10).json()["scheduler_alive"]


def test_fuzz_summary(fuzz_server):
    """The server is alive and still generates after the fuzzing; the reply counts are printed
    (``pytest -s``) for docs/reliability.md."""
    print(f"\nfuzz replies by status: {dict(sorted(STATUSES.items()))}, "
          f"total {sum(STATUSES.values())}")
    assert all(code < 500 for code in STATUSES)
    with httpx.Client(base_url=fuzz_server.url, timeout=REQUEST_TIMEOUT_S) as http:
        deadline = time.monotonic() + 10  # the last fuzzed tasks (<= 4 tokens each) finish
        while (h := http.get("/health").json())["active"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert h["scheduler_alive"] and h["active"] == 0 and h["queue"] == 0
        r = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] > 0


# ---- Unicode edge cases ---------------------------------------------------------------------------
LONE = "\ud800"  # sent as the JSON escape "\ud800": valid JSON, not valid UTF-16
EDGE_TEXTS = {"lone_surrogate": f"a{LONE}b\udfff", "nul": "a\u0000b", "one_mb": "é" * (1 << 19)}


def _post(http: httpx.Client, path: str, body: dict) -> httpx.Response:
    # ensure_ascii: lone surrogates travel as \\ud800 escapes, exactly as a JSON client sends them
    return http.post(path, content=json.dumps(body).encode(),
                     headers={"content-type": "application/json"})


def _bodies(text: str) -> list[tuple[str, dict]]:
    chat = {"messages": [{"role": "user", "content": text}], "max_tokens": 3}
    return [
        ("/v1/tasks/tmp", {"prompt": text, "max_tokens": 3}),
        ("/v1/tasks/create", {"prompt": text, "max_tokens": 3, "stream": True}),
        ("/v1/tasks/fim", {"prefix": text, "suffix": text, "max_tokens": 3}),
        ("/v1/tasks/tmp", {"prompt": [text], "max_tokens": 3}),  # 422 echoing the input
        ("/v1/tasks/tmp", {"prompt": "x", text[:100]: 1}),  # unknown field named by the input
        ("/v1/chat/completions", chat),
        ("/v1/chat/completions", {**chat, "stream": True, "stop": [text, "x"]}),
        ("/v1/chat/completions", {**chat, "model": text[:100], "stop": text}),
        ("/v1/completions", {"prompt": text, "max_tokens": 3, "echo": True,
                             "stop": [text[:100]]}),  # (longer: refused before the prompt)
        ("/v1/completions", {"prompt": [text, "y"], "max_tokens": 3, "echo": True,
                             "stream": True}),
        ("/v1/chat/completions", {"messages": [{"role": text[:100], "content": "x"}]}),
    ]


@pytest.mark.parametrize("name", list(EDGE_TEXTS))
def test_unicode_edge_cases_never_500(fuzz_server, name):
    text = EDGE_TEXTS[name]
    with httpx.Client(base_url=fuzz_server.url, timeout=REQUEST_TIMEOUT_S) as http:
        for path, body in _bodies(text):
            r = _post(http, path, body)
            assert r.status_code < 500, f"{path} {name}: {r.status_code} {r.text[:300]}"
            r.content.decode("utf-8")  # every reply is valid UTF-8
            if r.headers["content-type"].startswith("application/json"):
                r.json()
            elif r.status_code == 200:  # a stream ends with [DONE]
                assert r.text.rstrip().endswith("data: [DONE]"), r.text[-300:]
            if name == "one_mb" and "prompt" in body and path.startswith("/v1/completions"):
                assert r.status_code == 400 and "maximum context length" in r.text
        assert http.get("/health").json()["scheduler_alive"]
