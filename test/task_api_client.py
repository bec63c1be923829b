"""Client-side helpers for Task API tests: SSE parsing as a client does it, polling, shapes."""

from __future__ import annotations

import json
import re
import time

import httpx

TASK_ID = re.compile(r"TASK_[0-9a-f]{32}")
TMP_ID = re.compile(r"TMP_[0-9a-f]{32}")
TEMPLATE_ID = re.compile(r"_TMPL_[0-9a-f]{32}")
RESPONSE_KEYS = {"task_id", "result", "prefill_time", "gen_time", "speed", "finished"}
INFO_KEYS = {"task_id", "generated_buf", "status"}
PROMPT = "User: Tell me about linear attention.\n\nAssistant:"
GREEDY = {"temperature": 0, "top_k": 0, "top_p": 1, "presence_penalty": 0}


def parse_sse(body: str) -> list[str]:
    """The ``data`` payloads of an SSE body, as a client reads them (comments skipped)."""
    assert "\r" not in body and body.endswith("\n\n")
    events = []
    for block in body[:-2].split("\n\n"):
        lines = [ln for ln in block.split("\n") if not ln.startswith(":")]
        if lines:
            assert all(ln.startswith("data: ") for ln in lines), block
            events.append("\n".join(ln[6:] for ln in lines))
    return events


def stream_post(http, path: str, body: dict) -> tuple[list[dict], httpx.Response]:
    """POST a streaming request; the decoded events (before ``[DONE]``, which must end it)."""
    r = http.post(path, json={**body, "stream": True})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    return check_frames(parse_sse(r.text)), r


def check_frames(events: list[str]) -> list[dict]:
    assert events[-1] == "[DONE]" and "[DONE]" not in events[:-1]
    frames = [json.loads(e) for e in events[:-1]]
    assert set(frames[0]) == {"task_id", "prefill_time"}
    for f in frames[1:]:
        assert set(f) == {"data", "task_id", "gen_time", "speed"}, f
        assert f["task_id"] == frames[0]["task_id"] and f["data"]
        assert f["gen_time"] >= 0 and f["speed"] >= 0
    return frames


def text_of(frames: list[dict]) -> str:
    return "".join(f["data"] for f in frames[1:])


def wait_result(http, task_id: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        r = http.get(f"/v1/tasks/{task_id}/get_result")
        assert r.status_code == 200, r.text
        if r.json()["finished"] or time.monotonic() > deadline:
            assert r.json()["finished"], f"{task_id} did not finish in {timeout}s"
            return r.json()
        time.sleep(0.05)


def create(http, path="/v1/tasks/create", **body) -> dict:
    r = http.post(path, json={"prompt": PROMPT, "max_tokens": 8, **body})
    assert r.status_code == 200, r.text
    assert set(r.json()) == RESPONSE_KEYS
    return r.json()


# ---- basics ------------------------------------------------------------------------------
