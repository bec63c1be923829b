"""Async streaming clients for the reliability tests: each request ends as ``done`` (a complete
stream), ``refused`` (503 with ``Retry-After`` in the route's error shape) or ``bad`` (anything
else, with the reason), plus helpers to read a server's health and memory.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

import httpx

TASK_PROMPT = "User: Tell me about linear attention.\n\nAssistant:"
CHAT_MESSAGES = [{"role": "user", "content": "Tell me a story."}]


@dataclass
class Outcome:
    kind: str  # "done" | "refused" | "bad"
    route: str
    status: int = 0
    events: list = field(default_factory=list)  # decoded data payloads ("[DONE]" kept as is)
    why: str = ""
    seconds: float = 0.0


def _payloads(lines: list[str]) -> list:
    out = []
    for line in lines:
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def _refusal(route: str, r: httpx.Response, body: bytes) -> Outcome:
    """A 503 is a clean refusal only with Retry-After and the route's error shape."""
    try:
        err = json.loads(body)
    except ValueError:
        return Outcome("bad", route, r.status_code, why=f"non-JSON {r.status_code}: {body[:200]!r}")
    shape_ok = ("detail" in err) if route == "tasks" else set(err.get("error", {})) >= {
        "message", "type", "param", "code"}
    if r.status_code == 503 and r.headers.get("retry-after", "").isdigit() and shape_ok:
        return Outcome("refused", route, 503)
    return Outcome("bad", route, r.status_code, why=f"{r.status_code} {err}")


def check_task_stream(events: list) -> str:
    """'' if ``events`` are a complete Task API stream, else what is wrong."""
    if not events or events[-1] != "[DONE]":
        return "no [DONE] at the end"
    if not isinstance(events[0], dict) or set(events[0]) != {"task_id", "prefill_time"}:
        return f"bad header {events[0]!r}"
    if any("error" in e for e in events[1:-1]):
        return f"error event {events[-2]!r}"
    return ""


def check_chat_stream(events: list, n: int) -> str:
    """'' if ``events`` are a complete OpenAI chat stream of ``n`` choices, else what is wrong."""
    if not events or events[-1] != "[DONE]" or "[DONE]" in events[:-1]:
        return "no single [DONE] at the end"
    finished = {c["index"] for e in events[:-1] for c in e.get("choices", [])
                if c.get("finish_reason")}
    if any("error" in e for e in events[:-1]):
        return "error event"
    return "" if finished == set(range(n)) else f"finish_reason for choices {sorted(finished)}"


async def stream(client: httpx.AsyncClient, route: str, path: str, body: dict,
                 n: int = 1) -> Outcome:
    """POST a streaming request and classify how it ended."""
    t0 = time.monotonic()
    async with client.stream("POST", path, json={**body, "stream": True}) as r:
        if r.status_code != 200:
            out = _refusal(route, r, await r.aread())
        else:
            lines = [line async for line in r.aiter_lines()]
            events = _payloads(lines)
            why = check_task_stream(events) if route == "tasks" else check_chat_stream(events, n)
            out = Outcome("bad" if why else "done", route, 200, events, why)
    out.seconds = time.monotonic() - t0
    return out


def task_body(max_tokens: int, **kw) -> dict:
    return {"prompt": TASK_PROMPT, "max_tokens": max_tokens, **kw}


def chat_body(max_tokens: int, n: int = 1, **kw) -> dict:
    return {"messages": CHAT_MESSAGES, "max_tokens": max_tokens, "n": n, **kw}


async def watch_health(client: httpx.AsyncClient, seen: list[dict], stop: asyncio.Event,
                       every: float = 0.05) -> None:
    """Append ``/health`` replies to ``seen`` until ``stop`` is set."""
    while not stop.is_set():
        try:
            seen.append((await client.get("/health")).json())
        except httpx.TransportError:
            pass
        try:
            await asyncio.wait_for(stop.wait(), every)
        except asyncio.TimeoutError:
            pass


def wait_idle(http: httpx.Client, timeout: float = 20.0) -> dict:
    """Poll ``/health`` until no task is in a slot, queued or finishing (its state on its way
    home) and capacity is back to 1."""
    deadline = time.monotonic() + timeout
    while True:
        h = http.get("/health").json()
        if (h["active"] == h["queue"] == h["finishing"] == 0 and h["capacity"] == 1) \
                or time.monotonic() > deadline:
            return h
        time.sleep(0.02)


def rss_kb(pid: int) -> int:
    """Resident memory of process ``pid`` (``VmRSS`` in /proc), in kB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


class StreamReader(threading.Thread):
    """Reads one streaming request to its end in the background; ``started`` is set at the
    first data event."""

    def __init__(self, url: str, path: str, body: dict):
        super().__init__(daemon=True)
        self.url, self.path, self.body = url, path, {**body, "stream": True}
        self.events: list = []
        self.started = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as c:
            with c.stream("POST", self.path, json=self.body) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        data = line[6:]
                        self.events.append(data if data == "[DONE]" else json.loads(data))
                        self.started.set()
        self.started.set()
