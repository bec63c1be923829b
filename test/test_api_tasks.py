"""Task API (API.md §1) over plain HTTP against a real server (``python run.py``, tiny random model).

Random weights give random text, so tests compare the server with itself (greedy runs, streams vs
``get_result``, before vs after a restart) and check exact reply shapes, statuses and messages.
"""

from __future__ import annotations

import json
import re
import threading
import time

import httpx
import pytest

TASK_ID = re.compile(r"TASK_[0-9a-f]{32}")
TMP_ID = re.compile(r"TMP_[0-9a-f]{32}")
TEMPLATE_ID = re.compile(r"_TMPL_[0-9a-f]{32}")
RESPONSE_KEYS = {"task_id", "result", "prefill_time", "gen_time", "speed", "finished"}
INFO_KEYS = {"task_id", "generated_buf", "status"}
PROMPT = "User: Tell me about linear attention.\n\nAssistant:"
GREEDY = {"temperature": 0, "top_k": 0, "top_p": 1, "presence_penalty": 0}


@pytest.fixture(scope="module")
def http(server_url):
    with httpx.Client(base_url=server_url, timeout=30) as c:
        yield c


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
def test_health(http):
    h = http.get("/health").json()
    assert h["model"] == "rwkv7-tiny-random" and h["loaded"] is True
    assert h["scheduler_alive"] is True and h["capacity"] >= 1
    assert {"active", "queue", "max_batch_size"} <= set(h)


def test_tmp_non_stream_then_poll_and_status(http):
    r = create(http, "/v1/tasks/tmp", max_tokens=12, **GREEDY)
    assert TMP_ID.fullmatch(r["task_id"]) and r["result"] == "" and r["finished"] is False
    done = wait_result(http, r["task_id"])
    assert done["result"] and done["gen_time"] > 0 and done["speed"] > 0
    info = http.get(f"/v1/tasks/{r['task_id']}/status").json()
    assert info == {"task_id": r["task_id"], "generated_buf": 12, "status": 3}


def test_create_stream_matches_result_and_greedy_is_repeatable(http, tiny_tokenizer):
    frames, _ = stream_post(http, "/v1/tasks/create", {"prompt": PROMPT, "max_tokens": 24, **GREEDY})
    tid = frames[0]["task_id"]
    assert TASK_ID.fullmatch(tid) and frames[0]["prefill_time"] > 0
    assert len(frames) >= 3  # header + several pulses of 8 tokens
    assert wait_result(http, tid)["result"] == text_of(frames)
    # the same prompt as token ids, on the temporary route: the same greedy text
    ids = tiny_tokenizer.encode(PROMPT)
    again, _ = stream_post(http, "/v1/tasks/tmp", {"prompt": ids, "max_tokens": 24, **GREEDY})
    assert TMP_ID.fullmatch(again[0]["task_id"]) and text_of(again) == text_of(frames)


def test_fim(http):
    body = {"prefix": "def add(a, b):\n    return ", "suffix": "\n", "max_tokens": 6, **GREEDY}
    r = http.post("/v1/tasks/fim", json=body)
    assert r.status_code == 200 and TMP_ID.fullmatch(r.json()["task_id"])
    polled = wait_result(http, r.json()["task_id"])["result"]
    frames, _ = stream_post(http, "/v1/tasks/fim", body)
    assert text_of(frames) == polled
    # the documented prompt, sent as a plain prompt, gives the same greedy text
    prompt = f"✿prefix✿✿suffix✿{body['suffix']}✿middle✿{body['prefix']}"
    plain = create(http, "/v1/tasks/tmp", prompt=prompt, max_tokens=6, **GREEDY)
    assert wait_result(http, plain["task_id"])["result"] == polled


def test_list_shape(http):
    tid = create(http)["task_id"]
    lst = http.get("/v1/tasks/list").json()
    assert set(lst) == {"cpu_cache_count", "database_count", "total_count", "cpu_tasks", "db_tasks"}
    assert tid in lst["cpu_tasks"] and lst["cpu_cache_count"] == len(lst["cpu_tasks"])


# ---- streams -------------------------------------------------------------------------------
def test_concurrent_subscribers_see_the_same_text(http, server_url):
    tid = create(http, max_tokens=48, **GREEDY)["task_id"]
    texts: dict[int, str] = {}

    def subscribe(i: int, pos: int) -> None:
        with httpx.Client(base_url=server_url, timeout=30) as c:
            r = c.get(f"/v1/tasks/{tid}/stream", params={"pos": pos})
            assert r.status_code == 200
            texts[i] = text_of(check_frames(parse_sse(r.text)))

    threads = [threading.Thread(target=subscribe, args=(i, 0)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    full = wait_result(http, tid)["result"]
    assert len(texts) == 4 and all(t == full for t in texts.values())
    # resuming from a token offset gives the tail; past the end, nothing but [DONE]
    subscribe(10, 40)
    assert texts[10] and len(texts[10]) < len(full) and full.endswith(texts[10])
    r = http.get(f"/v1/tasks/{tid}/stream", params={"pos": 48})
    assert check_frames(parse_sse(r.text))[1:] == []


def test_utf8_never_split(http):
    """Chunks are whole characters: their concatenation is the text decoded in one piece."""
    prompt = "User: 用中文和表情符号写一首诗 🌸🎉 你好，世界！\n\nAssistant: 好的😀"
    for seed in range(4):
        body = {"prompt": prompt, "max_tokens": 40, "temperature": 2, "top_k": 0, "top_p": 1,
                "seed": seed}
        frames, _ = stream_post(http, "/v1/tasks/create", body)
        full = wait_result(http, frames[0]["task_id"])["result"]
        assert text_of(frames) == full
        pos = 0
        for f in frames[1:]:
            for j, ch in enumerate(f["data"]):
                assert ch != "\ufffd" or full[pos + j] == "\ufffd"
            pos += len(f["data"])


def test_tmp_stream_disconnect_stops_task_but_persistent_goes_on(http, server_url):
    ids = {}
    for path in ("/v1/tasks/tmp", "/v1/tasks/create"):
        with httpx.Client(base_url=server_url, timeout=30) as c:
            body = {"prompt": PROMPT, "max_tokens": 64 if "create" in path else 40000,
                    "stream": True, **GREEDY}
            with c.stream("POST", path, json=body) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {"):
                        ids[path] = json.loads(line[6:])["task_id"]
                        break  # leave after the header: the client is gone
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        tmp = http.get(f"/v1/tasks/{ids['/v1/tasks/tmp']}/status").json()
        if tmp["status"] == 3:
            break
        time.sleep(0.05)
    assert tmp["status"] == 3 and tmp["generated_buf"] < 40000
    kept = wait_result(http, ids["/v1/tasks/create"])
    info = http.get(f"/v1/tasks/{ids['/v1/tasks/create']}/status").json()
    assert kept["result"] and info["generated_buf"] == 64


# ---- lifecycle -------------------------------------------------------------------------------
def test_continue_stop_and_conflicts(http):
    tid = create(http, max_tokens=40000)["task_id"]  # long enough to still be running
    r = http.post(f"/v1/tasks/{tid}/continue", json={"prompt": "more"})
    assert r.status_code == 409 and "running" in r.json()["detail"]
    assert http.post(f"/v1/tasks/{tid}/fork").status_code == 409
    assert http.post(f"/v1/tasks/{tid}/as_template").status_code == 409
    info = http.post(f"/v1/tasks/{tid}/stop")
    assert info.status_code == 200 and set(info.json()) == INFO_KEYS
    first = wait_result(http, tid)
    n = http.get(f"/v1/tasks/{tid}/status").json()["generated_buf"]
    assert n < 40000 and first["finished"]
    r = http.post(f"/v1/tasks/{tid}/continue", json={"prompt": "\n\nUser: more\n\nAssistant:",
                                                      "max_tokens": 5, **GREEDY})
    assert r.status_code == 200 and r.json()["task_id"] == tid and r.json()["result"] == ""
    wait_result(http, tid)
    assert http.get(f"/v1/tasks/{tid}/status").json() == {"task_id": tid, "generated_buf": 5,
                                                          "status": 3}
    # continue without a body or prompt works too
    assert http.post(f"/v1/tasks/{tid}/continue").status_code == 200
    wait_result(http, tid)
    d = http.post(f"/v1/tasks/{tid}/delete")
    assert d.status_code == 200 and d.json()["task_id"] == tid
    assert http.get(f"/v1/tasks/{tid}/get_result").status_code == 404


def test_template_survives_restart(server, http):
    tpl_src = create(http, prompt="System: You translate English to French.\n\n", max_tokens=0)
    assert tpl_src["finished"] is True and tpl_src["prefill_time"] > 0
    r = http.post(f"/v1/tasks/{tpl_src['task_id']}/as_template")
    assert r.status_code == 200 and set(r.json()) == RESPONSE_KEYS
    tpl = r.json()["task_id"]
    assert TEMPLATE_ID.fullmatch(tpl) and r.json()["finished"] is True
    fork_body = {"prompt": "User: Hello world\n\nAssistant:", "max_tokens": 16, **GREEDY}
    f = http.post(f"/v1/tasks/{tpl}/fork", json=fork_body).json()
    assert TASK_ID.fullmatch(f["task_id"])
    before = wait_result(http, f["task_id"])["result"]
    t = http.post(f"/v1/tasks/{tpl}/fork", params={"tmp": "true"}, json=fork_body).json()
    assert TMP_ID.fullmatch(t["task_id"]) and wait_result(http, t["task_id"])["result"] == before
    frames, _ = stream_post(http, f"/v1/tasks/{tpl}/fork", fork_body)
    assert text_of(frames) == before
    persistent = create(http, max_tokens=10, **GREEDY)["task_id"]
    kept_text = wait_result(http, persistent)["result"]
    # templates are read-only and protected
    assert http.post(f"/v1/tasks/{tpl}/continue", json=fork_body).status_code == 403
    r = http.post(f"/v1/tasks/{tpl}/delete")
    assert r.status_code == 403 and "force" in r.json()["detail"]

    server.restart()
    with httpx.Client(base_url=server.url, timeout=30) as c:
        assert tpl in c.get("/v1/tasks/list").json()["db_tasks"]
        f2 = c.post(f"/v1/tasks/{tpl}/fork", json=fork_body).json()
        assert wait_result(c, f2["task_id"])["result"] == before
        assert wait_result(c, persistent)["result"] == kept_text
        r = c.post(f"/v1/tasks/{tpl}/delete", params={"force": "true"})
        assert r.status_code == 200 and r.json()["task_id"] == tpl
        assert c.get(f"/v1/tasks/{tpl}/status").status_code == 404


# ---- bad input ---------------------------------------------------------------------------------
def _field_error(r: httpx.Response, field: str) -> None:
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert any(field in map(str, e["loc"]) for e in detail), detail


@pytest.mark.parametrize("body,field", [
    ({"prompt": PROMPT, "temperature": "hot"}, "temperature"),
    ({"prompt": PROMPT, "temperature": 2.5}, "temperature"),
    ({"prompt": PROMPT, "max_tokens": -1}, "max_tokens"),
    ({"prompt": PROMPT, "max_tokens": 40961}, "max_tokens"),
    ({"prompt": PROMPT, "top_p": 1.5}, "top_p"),
    ({"prompt": PROMPT, "top_k": -2}, "top_k"),
    ({"prompt": PROMPT, "penalty_decay": 2}, "penalty_decay"),
    ({"prompt": PROMPT, "temprature": 0.5}, "temprature"),
    ({"prompt": 123}, "prompt"),
    ({"prompt": ""}, "prompt"),
    ({"prompt": []}, "prompt"),
    ({"prompt": [1, 70000]}, "prompt"),
    ({"prompt": [-1]}, "prompt"),
    ({"prompt": [1, "2"]}, "prompt"),
    ({"max_tokens": 5}, "prompt"),
])
def test_bad_bodies_are_422_naming_the_field(http, body, field):
    for path in ("/v1/tasks/tmp", "/v1/tasks/create"):
        _field_error(http.post(path, json=body), field)


def test_other_bad_requests(http):
    r = http.post("/v1/tasks/create", content=b'{"prompt": "x",', headers={"content-type":
                                                                          "application/json"})
    assert r.status_code == 422 and "JSON" in r.text
    _field_error(http.post("/v1/tasks/fim", json={"suffix": "x"}), "prefix")
    tid = create(http, max_tokens=1)["task_id"]
    _field_error(http.post(f"/v1/tasks/{tid}/continue", json={"top_p": -1}), "top_p")
    assert http.get(f"/v1/tasks/{tid}/stream", params={"pos": -1}).status_code == 422
    assert http.post(f"/v1/tasks/{tid}/fork", params={"tmp": "maybe"}).status_code == 422
    too_long = http.post("/v1/tasks/tmp", json={"prompt": [1] * 131073})
    assert too_long.status_code == 400 and "RWKV_MAX_PROMPT_TOKENS" in too_long.json()["detail"]
    big = http.post("/v1/tasks/tmp", content=b"x" * (8 * 1024 * 1024 + 1))
    assert big.status_code == 413


@pytest.mark.parametrize("method,action", [
    ("GET", "get_result"), ("GET", "stream"), ("GET", "status"), ("POST", "fork"),
    ("POST", "continue"), ("POST", "stop"), ("POST", "as_template"), ("POST", "delete"),
])
def test_unknown_ids_are_404(http, method, action):
    for tid in ("TASK_" + "0" * 32, "TMP_nope", "_TMPL_missing"):
        r = http.request(method, f"/v1/tasks/{tid}/{action}")
        assert r.status_code == 404 and r.json() == {"detail": "Task not found"}


def test_still_serving_after_errors(http):
    test_other_bad_requests(http)
    assert http.get("/health").json()["scheduler_alive"] is True
    r = create(http, "/v1/tasks/tmp", max_tokens=4)
    assert wait_result(http, r["task_id"])["finished"]


# ---- security and admission ---------------------------------------------------------------------
def test_cors_preflight_and_headers_on_errors(http):
    r = http.options("/v1/tasks/create", headers={
        "Origin": "https://chat.example.com", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os",
        "Access-Control-Request-Private-Network": "true"})
    assert r.status_code in (200, 204)
    assert r.headers["access-control-allow-origin"] in ("*", "https://chat.example.com")
    assert "POST" in r.headers["access-control-allow-methods"]
    assert "x-stainless-os" in r.headers["access-control-allow-headers"]
    assert "authorization" in r.headers["access-control-allow-headers"]
    assert r.headers["access-control-allow-private-network"] == "true"
    err = http.get("/v1/tasks/TMP_x/status", headers={"Origin": "https://chat.example.com"})
    assert err.status_code == 404 and "access-control-allow-origin" in err.headers


def test_api_key_and_queue_limit(start_server):
    key = "sk-test-0123456789abcdef"
    srv = start_server(RWKV_API_KEY=key, RWKV_MAX_BATCH_SIZE="1", RWKV_MAX_QUEUE="1",
                       RWKV_CORS_ORIGINS="https://ok.example")
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        assert c.get("/health").status_code == 200  # open
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": key}):
            r = c.get("/v1/tasks/list", headers=headers)
            assert r.status_code == 401 and "API key" in r.json()["detail"]
        assert c.get("/v1/tasks/list", headers=auth).status_code == 200
        pre = c.options("/v1/tasks/tmp", headers={"Origin": "https://ok.example",
                                                  "Access-Control-Request-Method": "POST"})
        assert pre.status_code in (200, 204)
        assert pre.headers["access-control-allow-origin"] == "https://ok.example"
        bad = c.options("/v1/tasks/tmp", headers={"Origin": "https://evil.example",
                                                  "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in bad.headers
        # one slot, one waiting place: the third long task is refused with Retry-After
        body = {"prompt": PROMPT, "max_tokens": 40000}
        ids = [c.post("/v1/tasks/create", json=body, headers=auth) for _ in range(2)]
        assert [r.status_code for r in ids] == [200, 200]
        deadline = time.monotonic() + 10
        while c.get("/health").json()["active"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        full = c.post("/v1/tasks/create", json=body, headers=auth)
        assert full.status_code == 503 and full.headers["retry-after"].isdigit()
        for r in ids:
            c.post(f"/v1/tasks/{r.json()['task_id']}/stop", headers=auth)
    srv.stop()
    assert key not in srv.log()
