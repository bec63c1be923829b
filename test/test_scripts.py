"""few_shot.txt format, and the load scripts (batch_sync/batch_async/locustfile) against stubs.

No RWKV server here: the batch scripts run over httpx mock transports, the locustfile against a
tiny stdlib SSE stub on a loopback port.
"""
from __future__ import annotations

import asyncio
import csv
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

import batch_async
import batch_sync
from bench_common import StreamMeter, parse_args, summarize

ROOT = Path(__file__).resolve().parent.parent
DIALOGUE = re.compile(
    r"User: (?P<q>[^\n]+)\n\nAssistant:  <think>(?P<think>[^\n<]+)</think>\n"
    r"(?P<a>(?:(?!\n\n).)+)\n", re.S)

# (category, pattern its <think> guidance matches, least number of dialogues)
CATEGORIES = [
    ("knowledge", r"定义|[Dd]efin", 6),
    ("coding", r"编程题|coding task|[Cc]oding question|SQL task|shell task", 6),
    ("translation", r"中译英|成语翻译|English to Chinese", 5),
    ("math", r"每一步|逐步|every step|each step|step by step", 6),
    ("creative", r"创意写作|Creative writing", 5),
]


def dialogues() -> list[re.Match | None]:
    """Dialogues of few_shot.txt (None for a malformed one), checking the blank-line separators."""
    text = (ROOT / "few_shot.txt").read_text(encoding="utf-8")
    assert text.endswith("<|endoftext|>\n")
    blocks = text.split("<|endoftext|>\n")[:-1]
    assert not blocks[0].startswith("\n")
    assert all(b.startswith("\n") and not b.startswith("\n\n") for b in blocks[1:])
    return [DIALOGUE.fullmatch(b.removeprefix("\n")) for b in blocks]


def test_few_shot_format_and_coverage():
    found = dialogues()
    assert len(found) >= 32
    assert all(m is not None for m in found), [i for i, m in enumerate(found) if m is None]
    questions = [m["q"] for m in found]
    cjk = [q for q in questions if re.search(r"[\u4e00-\u9fff]", q)]
    assert 10 <= len(cjk) <= len(questions) - 10           # both languages well represented
    for name, guidance, least in CATEGORIES:
        hits = [m for m in found if re.search(guidance, m["think"])]
        assert len(hits) >= least, name
        langs = {bool(re.search(r"[\u4e00-\u9fff]", m["q"])) for m in hits}
        assert langs == {True, False}, f"{name} needs Chinese and English dialogues"
    coding = [m for m in found if re.search(CATEGORIES[1][1], m["think"])]
    assert all(m["a"].count("```") >= 2 for m in coding)   # complete code in fenced blocks
    assert len(set(questions)) == len(questions)


@pytest.mark.parametrize("script", ["batch_sync.py", "batch_async.py"])
def test_batch_script_help(script):
    out = subprocess.run([sys.executable, str(ROOT / "test" / script), "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for opt in ("--url", "--n", "--concurrency", "--max-tokens", "--api"):
        assert opt in out.stdout


def tasks_frames(n_chunks: int) -> bytes:
    frames = [{"task_id": "TMP_x", "prefill_time": 0.01}]
    frames += [{"data": "你好", "task_id": "TMP_x", "gen_time": 0.5, "speed": 4.0}] * n_chunks
    return "".join(f"data: {json.dumps(f)}\n\n" for f in frames).encode() + b"data: [DONE]\n\n"


def openai_frames() -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 7}}
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    body = [role, chunk, chunk, usage]
    return "".join(f"data: {json.dumps(f)}\n\n" for f in body).encode() + b"data: [DONE]\n\n"


def stub_handler(request: httpx.Request) -> httpx.Response:
    """Request 3 fails with 500, request 5 loses its [DONE]; the rest stream 3 chunks."""
    body = json.loads(request.content)
    if request.url.path == "/v1/chat/completions":
        return httpx.Response(200, content=openai_frames())
    assert body["stream"] is True and body["max_tokens"] == 5
    if body["prompt"].startswith("User: 计算"):                # PROMPTS[3], request 3
        return httpx.Response(500, json={"detail": "boom"})
    if body["prompt"].startswith("User: Write a short poem"):  # PROMPTS[4], request 4
        return httpx.Response(200, content=tasks_frames(3)[:-len(b"data: [DONE]\n\n")])
    return httpx.Response(200, content=tasks_frames(3))


def test_stream_meter_counts():
    m = StreamMeter("tasks")
    for line in tasks_frames(2).decode().split("\n"):
        m.feed(line)
    m.finish(200)
    assert m.ok and m.chunks == 2 and m.tokens == 4 and m.text_bytes == 12
    m = StreamMeter("openai")
    for line in openai_frames().decode().split("\n"):
        m.feed(line)
    m.finish(200)
    assert m.ok and m.chunks == 2 and m.tokens == 7        # usage wins over counted chunks
    m = StreamMeter("tasks")
    for line in ["event: error", 'data: {"message": "x"}', "", "data: [DONE]"]:
        m.feed(line)
    m.finish(200)
    assert not m.ok and m.error.startswith("error event")


def test_batch_sync_report_against_mock():
    args = parse_args("t", ["--n", "6", "--concurrency", "3", "--max-tokens", "5"])
    figures = batch_sync.run_batch(args, transport=httpx.MockTransport(stub_handler))
    assert figures["requests"] == 6 and figures["errors"] == 2
    assert figures["output_tokens"] == 4 * 2 * 3            # 4 good streams x 3 chunks x 2 tok
    assert figures["first_error"].startswith("HTTP 500: ") and "boom" in figures["first_error"]
    assert 0 < figures["latency_p50"] <= figures["latency_p95"]


def test_batch_async_openai_against_mock():
    args = parse_args("t", ["--n", "5", "--concurrency", "2", "--api", "openai"])
    figures = asyncio.run(batch_async.run_batch_async(
        args, transport=httpx.MockTransport(stub_handler)))
    assert figures["requests"] == 5 and figures["errors"] == 0
    assert figures["output_tokens"] == 5 * 7
    assert summarize([], 1.0)["tok_per_s"] == 0.0


def test_batch_async_spreads_connections_over_small_pools(monkeypatch):
    """More requests in flight than one client's pool (batch_async.POOL): several clients of
    at most POOL connections each carry them (a single pool of hundreds was the client's
    bottleneck), and every request completes."""
    made = []
    real = httpx.AsyncClient

    def counting(*a, **kw):
        made.append(kw["limits"].max_connections)
        return real(*a, **kw)

    monkeypatch.setattr(batch_async.httpx, "AsyncClient", counting)
    args = parse_args("t", ["--n", "100", "--concurrency", "70", "--api", "openai"])
    figures = asyncio.run(batch_async.run_batch_async(
        args, transport=httpx.MockTransport(stub_handler)))
    assert figures["requests"] == 100 and figures["errors"] == 0
    assert made == [24, 24, 24] and batch_async.POOL == 32


def test_batch_async_keeps_its_concurrency_with_uneven_requests():
    """A request goes to the client with the fewest in flight, so slow requests never queue
    inside one client's pool while `--concurrency` allows them to run: of 48 slow (3 s) and 48
    fast requests, 64 in flight over two pools of 32, the server sees more slow ones at once
    than one pool holds (the first form gave request i to client i % 2: client 0 held every
    slow one, at most 32 at a time). A real HTTP server: httpx applies its pool limits to real connections only.
    (Slow for 3 s: at 1 s, on 2 cores busy with other work, the fast ones did not all come
    back before the first slow ones ended, and the count stopped at 32; session 51.)"""
    from bench_common import CHAT_QUESTIONS

    lock, slow = threading.Lock(), [0, 0]  # slow requests in the server now, and at most

    class Uneven(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (stdlib name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if CHAT_QUESTIONS.index(body["messages"][0]["content"]) % 2 == 0:  # even indices
                with lock:
                    slow[0] += 1
                    slow[1] = max(slow)
                time.sleep(3.0)
                with lock:
                    slow[0] -= 1
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(openai_frames())

        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 128  # 64 connect at once

    server = Server(("127.0.0.1", 0), Uneven)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        args = parse_args("t", ["--url", url, "--n", "96", "--concurrency", "64",
                                "--api", "openai"])
        figures = asyncio.run(batch_async.run_batch_async(args))
    finally:
        server.shutdown()
        server.server_close()
    assert figures["requests"] == 96 and figures["errors"] == 0
    assert slow[1] > 32, slow  # more than one pool's worth (48 here when not starved)


class _SSEStub(http.server.BaseHTTPRequestHandler):
    """Streams a fixed Task API reply to any POST."""

    def do_POST(self):  # noqa: N802 (stdlib name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(tasks_frames(2))

    def log_message(self, *args):
        pass


def test_locustfile_headless_against_stub(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SSEStub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "test" / "locustfile.py"),
               "--host", f"http://127.0.0.1:{server.server_port}", "--headless", "-u", "2",
               "-r", "2", "--run-time", "5s", "--csv", str(tmp_path / "perf"), "--only-summary"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=90,
                             env={**os.environ, "RWKV_LOCUST_MAX_TOKENS": "5"})
    finally:
        server.shutdown()
    assert out.returncode == 0, out.stderr[-2000:]
    with open(tmp_path / "perf_stats.csv", newline="") as f:
        rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
    for key in [("SSE", "ttft"), ("SSE", "stream"), ("POST", "POST /v1/tasks/tmp")]:
        assert int(rows[key]["Request Count"]) > 0 and rows[key]["Failure Count"] == "0", key
