"""Load and admission control (issue 6 §1-2) against a real server on the tiny random checkpoint.

Load: 256 concurrent streaming clients — Task API ``/v1/tasks/tmp`` and OpenAI chat, a quarter
with ``n=2`` — in three rounds. Every request ends as a complete stream or a clean 503 with
``Retry-After``; none hangs (a round has an overall timeout); the scheduler's capacity rises above 1
under load and falls back to 1 when idle; the server's resident memory after round 3 stays within a
small tolerance of round 1. Admission: queue bound, prompt and body limits, the ``max_tokens`` cap.
"""

from __future__ import annotations

import asyncio
import os
import time

import httpx
import pytest

from reliability_clients import (chat_body, rss_kb, stream, task_body, wait_idle,
                                 watch_health)

CLIENTS = 256
ROUNDS = int(os.environ.get("RWKV_LOAD_ROUNDS", "3"))  # more: does memory level off?
ROUND_TIMEOUT_S = 120  # a round that takes longer means some request hung
MAX_TOKENS = 8
PROMPT_LIMIT, BODY_LIMIT, TOKENS_CAP = 256, 64 * 1024, 8
# The task cache is set small so it fills in round 1. The prefix state cache is off: it may
# legitimately grow up to its own budget (tested in test_api_prefix_cache.py), which an RSS check
# cannot tell from a leak of the serving path. RWKV_LOAD_STATE_CACHE_MB runs it with the cache on.
CACHE_MB = os.environ.get("RWKV_LOAD_STATE_CACHE_MB", "0")
LOAD_ENV = {"RWKV_MAX_BATCH_SIZE": "64", "RWKV_MAX_QUEUE": "224", "RWKV_STATE_CACHE_MB": CACHE_MB,
            "RWKV_TASK_DEFAULT_CPU_CAPACITY": "64", "RWKV_MAX_PROMPT_TOKENS": str(PROMPT_LIMIT),
            "RWKV_MAX_BODY_BYTES": str(BODY_LIMIT), "RWKV_MAX_TOKENS_CAP": str(TOKENS_CAP),
            # glibc: fewer per-thread arenas (without it RSS stepped up ~60 MB between rounds 1
            # and 2, then held), and a fixed mmap threshold (without it glibc raises the threshold
            # after large frees and RSS steps up 8-30 MB at random rounds: a CI run failed on
            # +28 MB in round 3 after a flat round 2). Both are the allocator, not a leak; see
            # docs/reliability.md.
            "MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}
# With both settings idle RSS held within 0.3 MB over 6 rounds (docs/reliability.md). 12 MB over
# rounds 2-3 (~400 requests) shows a leak of ~30 KB per request or more: a recurrent state (~66 KB
# on the tiny model) or a penalty vector (256 KB) kept per request. Leaked Task objects alone
# (~5 KB each: keeping every finished task grew RSS by 2.2 MB over rounds 2-3) stay under it.
RSS_TOLERANCE_KB = 12 * 1024


def _request(i: int) -> tuple[str, str, dict, int]:
    """Client ``i``: ``(route, path, body, n)``; half Task API, half chat (every other one n=2)."""
    if i % 2 == 0:
        return "tasks", "/v1/tasks/tmp", task_body(MAX_TOKENS), 1
    n = 2 if i % 4 == 1 else 1
    return "openai", "/v1/chat/completions", chat_body(MAX_TOKENS, n=n), n


async def _round(url: str):
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        stop, seen = asyncio.Event(), []
        watcher = asyncio.create_task(watch_health(client, seen, stop))
        t0 = time.monotonic()
        try:
            outcomes = await asyncio.wait_for(asyncio.gather(
                *[stream(client, *_request(i)) for i in range(CLIENTS)]), ROUND_TIMEOUT_S)
        finally:
            stop.set()
            await watcher
        return outcomes, seen, time.monotonic() - t0


@pytest.fixture(scope="module")
def load_server(start_server):
    srv = start_server(**LOAD_ENV)
    yield srv
    srv.stop()  # free its memory for the rest of the session


def test_256_streaming_clients_three_rounds(load_server):
    http = httpx.Client(base_url=load_server.url, timeout=30)
    rss, lines = [], []
    for rnd in range(ROUNDS):
        outcomes, seen, seconds = asyncio.run(_round(load_server.url))
        bad = [o for o in outcomes if o.kind == "bad"]
        assert not bad, [(o.route, o.status, o.why) for o in bad[:5]]
        done = [o for o in outcomes if o.kind == "done"]
        refused = len(outcomes) - len(done)
        assert len(done) >= CLIENTS // 4, f"only {len(done)} of {CLIENTS} completed"
        per_route = {r: sum(o.route == r for o in done) for r in ("tasks", "openai")}
        peak = max(h["capacity"] for h in seen)
        assert peak > 1, "capacity never rose under load"
        idle = wait_idle(http)
        assert (idle["active"], idle["queue"], idle["capacity"]) == (0, 0, 1), idle
        rss.append(rss_kb(load_server.proc.pid))
        cache = idle["prefix_cache"]
        lines.append(f"round {rnd + 1}: {len(done)} streams completed {per_route}, "
                     f"{refused} refused (503), "
                     f"peak capacity {peak}, peak queue {max(h['queue'] for h in seen)}, "
                     f"{seconds:.1f} s, idle RSS {rss[-1] / 1024:.1f} MB, prefix cache "
                     f"{cache.get('entries', 0)} entries {cache.get('bytes', 0) / 2**20:.1f} MB")
    print("\n" + "\n".join(lines))
    assert rss[-1] <= rss[0] + RSS_TOLERANCE_KB, f"RSS grew: {rss} kB"
    assert http.get("/health").json()["scheduler_alive"]


# ---- admission limits: prompt length, body size, max_tokens cap -------------------------------------
def _no_work_done(http: httpx.Client, before: dict) -> None:
    h = http.get("/health").json()
    assert (h["active"], h["queue"]) == (0, 0)
    assert http.get("/v1/tasks/list").json()["total_count"] == before["total_count"]


def test_prompt_over_limit_is_400_before_any_work(load_server):
    http = httpx.Client(base_url=load_server.url, timeout=30)
    wait_idle(http)
    before = http.get("/v1/tasks/list").json()
    ids = [11] * (PROMPT_LIMIT + 1)
    text = "word " * (PROMPT_LIMIT + 1)  # one token per word at least
    for path in ("/v1/tasks/tmp", "/v1/tasks/create"):
        for prompt in (ids, text):
            r = http.post(path, json={"prompt": prompt, "max_tokens": 4})
            assert r.status_code == 400 and "RWKV_MAX_PROMPT_TOKENS" in r.json()["detail"], r.text
    chat = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": text}]})
    comp = http.post("/v1/completions", json={"prompt": ids})
    for r, param in ((chat, "messages"), (comp, "prompt")):
        err = r.json()["error"]
        assert r.status_code == 400 and err["code"] == "context_length_exceeded", r.text
        assert err["param"] == param and err["message"].startswith(
            f"This model's maximum context length is {PROMPT_LIMIT} tokens")
    _no_work_done(http, before)
    ok = http.post("/v1/tasks/tmp", json={"prompt": ids[:PROMPT_LIMIT], "max_tokens": 1})
    assert ok.status_code == 200  # exactly at the limit is accepted


def test_body_over_limit_is_413_in_the_routes_shape(load_server):
    http = httpx.Client(base_url=load_server.url, timeout=30)
    wait_idle(http)
    before = http.get("/v1/tasks/list").json()
    big = {"prompt": "x" * BODY_LIMIT, "max_tokens": 1}
    r = http.post("/v1/tasks/create", json=big)
    assert r.status_code == 413 and "RWKV_MAX_BODY_BYTES" in r.json()["detail"]
    r = http.post("/v1/completions", json=big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    chunked = http.post("/v1/chat/completions", content=iter([b"{" * 4096] * 17))  # no length
    assert chunked.status_code == 413 and "error" in chunked.json()
    _no_work_done(http, before)


def test_max_tokens_is_capped_on_both_apis(load_server):
    """Above ``RWKV_MAX_TOKENS_CAP`` (but within the Task API's 0…40960 range) ``max_tokens`` is
    capped, never refused; both APIs stop at the cap with the 'length' reason."""
    http = httpx.Client(base_url=load_server.url, timeout=30)
    greedy = {"temperature": 0, "top_k": 0, "top_p": 1, "presence_penalty": 0}
    tid = http.post("/v1/tasks/create", json=task_body(40960, **greedy)).json()["task_id"]
    deadline = time.monotonic() + 20
    while not http.get(f"/v1/tasks/{tid}/get_result").json()["finished"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert http.get(f"/v1/tasks/{tid}/status").json()["generated_buf"] == TOKENS_CAP
    over = http.post("/v1/tasks/tmp", json=task_body(40961))
    assert over.status_code == 422  # outside the documented range: a bad value, named
    for body in ({"max_tokens": 10**6}, {"max_completion_tokens": 10**6}, {}):
        r = http.post("/v1/chat/completions",
                      json={**chat_body(1), "max_tokens": None, **greedy, **body})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] <= TOKENS_CAP
    r = http.post("/v1/completions", json={"prompt": [11, 12], "max_tokens": 10**6, **greedy})
    assert r.json()["usage"]["completion_tokens"] == TOKENS_CAP
    assert r.json()["choices"][0]["finish_reason"] == "length"
