"""Shared pieces of the load scripts (batch_sync.py, batch_async.py, locustfile.py).

Not a test module: request bodies for both APIs, an incremental SSE parser that measures one
streamed request, the command-line options and the throughput report.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field

PROMPTS = [
    "User: 什么是光合作用？\n\nAssistant: <think>\n</think>",
    "User: Write a Python function that reverses a string.\n\nAssistant: <think>\n</think>",
    "User: Translate into Chinese: The weather is lovely today.\n\nAssistant: <think>\n</think>",
    "User: 计算 (12 + 8) × 3。\n\nAssistant: <think>\n</think>",
    "User: Write a short poem about the moon.\n\nAssistant: <think>\n</think>",
    "User: 用三句话介绍一下长城。\n\nAssistant: <think>\n</think>",
]
CHAT_QUESTIONS = [
    "什么是光合作用？",
    "Write a Python function that reverses a string.",
    "Translate into Chinese: The weather is lovely today.",
    "Write a short poem about the moon.",
]


def request_for(api: str, index: int, max_tokens: int, temperature: float,
                model: str = "rwkv-7") -> tuple[str, dict]:
    """(path, JSON body) of the `index`-th streaming request for `api` ("tasks" or "openai")."""
    if api == "tasks":
        body = {"prompt": PROMPTS[index % len(PROMPTS)], "max_tokens": max_tokens,
                "temperature": temperature, "stream": True}
        return "/v1/tasks/tmp", body
    if api == "openai":
        question = CHAT_QUESTIONS[index % len(CHAT_QUESTIONS)]
        body = {"model": model, "messages": [{"role": "user", "content": question}],
                "max_tokens": max_tokens, "temperature": temperature, "stream": True,
                "stream_options": {"include_usage": True}}
        return "/v1/chat/completions", body
    raise ValueError(f"unknown api {api!r} (tasks or openai)")


@dataclass
class StreamMeter:
    """Consumes the SSE lines of one streamed reply and measures it.

    Timing starts at construction (just before the request is sent). `ttft` is the time to the
    first frame that carries text; `tokens` comes from the OpenAI `usage` frame when present,
    else from the frames (Task API: `speed * gen_time` per chunk, at least 1).
    """
    api: str
    start: float = field(default_factory=time.perf_counter)
    ttft: float | None = None
    end: float | None = None
    done: bool = False
    error: str | None = None
    chunks: int = 0
    chunk_tokens: int = 0
    usage_tokens: int | None = None
    text_bytes: int = 0
    _event: str = ""

    def feed(self, line: str) -> None:
        """Take one line of the stream (without its newline)."""
        line = line.rstrip("\r")
        if not line:
            self._event = ""
        elif line.startswith("event:"):
            self._event = line[6:].strip()
        elif line.startswith("data:") and not self.done and self.error is None:
            self._data(line[5:].strip())

    def _data(self, payload: str) -> None:
        if payload == "[DONE]":
            self.done = True
            return
        if self._event == "error":
            self.error = f"error event: {payload[:200]}"
            return
        try:
            frame = json.loads(payload)
        except json.JSONDecodeError:
            self.error = f"bad SSE frame: {payload[:200]}"
            return
        if not isinstance(frame, dict) or "error" in frame or "detail" in frame:
            self.error = f"error frame: {payload[:200]}"
            return
        text = self._text_of(frame)
        if text is None:
            return
        if self.ttft is None:
            self.ttft = time.perf_counter() - self.start
        self.chunks += 1
        self.text_bytes += len(text.encode("utf-8"))
        if self.api == "tasks":
            est = float(frame.get("speed") or 0) * float(frame.get("gen_time") or 0)
            self.chunk_tokens += max(1, round(est))
        else:
            self.chunk_tokens += 1

    def _text_of(self, frame: dict) -> str | None:
        """Text carried by a frame, or None for frames without text (header, usage, role)."""
        if self.api == "tasks":
            return frame.get("data")
        usage = frame.get("usage")
        if usage:
            self.usage_tokens = int(usage.get("completion_tokens") or 0)
        choices = frame.get("choices") or []
        delta = choices[0].get("delta", {}) if choices else {}
        text = (delta.get("content") or "") + (delta.get("reasoning_content") or "")
        return text or None

    def finish(self, status: int = 200, body: str | None = None) -> None:
        """Close the measurement; a non-200 status (``body``: its response text) or a stream
        without [DONE] is an error."""
        self.end = time.perf_counter()
        if status != 200 and self.error is None:
            self.error = f"HTTP {status}" + (f": {body[:200]}" if body else "")
        elif not self.done and self.error is None:
            self.error = "stream ended without [DONE]"

    def failed(self, exc: Exception) -> None:
        """The request failed in transport (connection refused, reset, timeout)."""
        self.error = f"{type(exc).__name__}: {exc}"
        self.finish()

    @property
    def ok(self) -> bool:
        return self.error is None and self.done

    @property
    def latency(self) -> float:
        return (self.end or time.perf_counter()) - self.start

    @property
    def tokens(self) -> int:
        return self.usage_tokens if self.usage_tokens is not None else self.chunk_tokens


def parse_args(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options shared by batch_sync.py and batch_async.py."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--url", default="http://localhost:8000", help="server base URL")
    p.add_argument("--n", type=int, default=64, help="number of requests")
    p.add_argument("--concurrency", type=int, default=16, help="requests in flight at once")
    p.add_argument("--max-tokens", type=int, default=200, help="max_tokens of each request")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--api", choices=["openai", "tasks"], default="tasks",
                   help="tasks: POST /v1/tasks/tmp; openai: POST /v1/chat/completions")
    p.add_argument("--model", default="rwkv-7", help="model name for --api openai")
    p.add_argument("--api-key", default=os.environ.get("RWKV_API_KEY"),
                   help="bearer key (default: $RWKV_API_KEY)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    args = p.parse_args(argv)
    if args.n < 1 or args.concurrency < 1 or args.max_tokens < 0:
        p.error("--n and --concurrency must be >= 1, --max-tokens >= 0")
    return args


def headers_for(args: argparse.Namespace) -> dict[str, str]:
    return {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}


def _pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(len(ordered) * q / 100))
    return ordered[rank - 1]


def summarize(meters: list[StreamMeter], seconds: float) -> dict:
    """Throughput figures of a finished batch (latencies in seconds, over successful requests)."""
    good = [m for m in meters if m.ok]
    tokens = sum(m.tokens for m in good)
    lat = [m.latency for m in good]
    ttft = [m.ttft for m in good if m.ttft is not None]
    return {
        "requests": len(meters), "errors": len(meters) - len(good), "output_tokens": tokens,
        "seconds": seconds, "tok_per_s": tokens / seconds if seconds > 0 else 0.0,
        "latency_mean": statistics.fmean(lat) if lat else 0.0,
        "latency_p50": _pct(lat, 50) if lat else 0.0,
        "latency_p95": _pct(lat, 95) if lat else 0.0,
        "ttft_mean": statistics.fmean(ttft) if ttft else 0.0,
        "first_error": next((m.error for m in meters if not m.ok), None),
    }


def format_report(s: dict, title: str) -> str:
    """Human-readable report of `summarize`'s figures."""
    req_per_s = s["requests"] / max(s["seconds"], 1e-9)
    lines = [
        f"── {title} ──",
        f" requests      : {s['requests']}  (errors: {s['errors']})",
        f" output tokens : {s['output_tokens']}",
        f" total time    : {s['seconds']:.2f} s",
        f" throughput    : {s['tok_per_s']:.1f} tok/s, {req_per_s:.2f} req/s",
        f" latency       : mean {s['latency_mean']:.3f} s, p50 {s['latency_p50']:.3f} s, "
        f"p95 {s['latency_p95']:.3f} s",
        f" TTFT mean     : {s['ttft_mean']:.3f} s",
    ]
    if s["first_error"]:
        lines.append(f" first error   : {s['first_error']}")
    return "\n".join(lines)
