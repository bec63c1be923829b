"""Task API under bad input, with an API key, CORS and a full queue (real server, tiny model).

Every error is answered with the right status and a readable message, and the server keeps serving.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest
import torch

from task_api_client import PROMPT, create, wait_result


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
    ({"prompt": [65536]}, "prompt"),  # the vocabulary's size: one past its last id
    ({"prompt": [-1]}, "prompt"),
    ({"prompt": [1, "2"]}, "prompt"),
    ({"prompt": [1, None]}, "prompt"),  # ids are checked by the route (TaskService.encode)
    ({"prompt": [1, True]}, "prompt"),
    ({"max_tokens": 5}, "prompt"),
    # read as numbers and switches before session 23 (true was max_tokens 1, "yes" a stream)
    ({"prompt": PROMPT, "max_tokens": True}, "max_tokens"),
    ({"prompt": PROMPT, "max_tokens": "3"}, "max_tokens"),
    ({"prompt": PROMPT, "seed": True}, "seed"),
    ({"prompt": PROMPT, "top_k": 2.5}, "top_k"),
    ({"prompt": PROMPT, "temperature": "0.5"}, "temperature"),
    ({"prompt": PROMPT, "stream": "yes"}, "stream"),
    ({"prompt": PROMPT, "stream": 1}, "stream"),
])
def test_bad_bodies_are_422_naming_the_field(http, body, field):
    for path in ("/v1/tasks/tmp", "/v1/tasks/create"):
        _field_error(http.post(path, json=body), field)


def test_a_fork_past_the_max_tokens_range_is_refused_before_any_copy(http):
    """The range is a setting's (``TaskService.sampling``), checked before the state is copied:
    no copy is left behind."""
    tid = http.post("/v1/tasks/create", json={"prompt": PROMPT, "max_tokens": 2}).json()["task_id"]
    wait_result(http, tid)
    count = http.get("/v1/tasks/list").json()["total_count"]
    for path in (f"/v1/tasks/{tid}/fork", f"/v1/tasks/{tid}/continue"):
        _field_error(http.post(path, json={"max_tokens": 40961}), "max_tokens")
    assert http.get("/v1/tasks/list").json()["total_count"] == count
    http.post(f"/v1/tasks/{tid}/delete")


def test_whole_numbers_written_as_floats_are_integers(http):
    """``max_tokens: 3.0`` (Python's json writes a computed count so) is 3, as the OpenAI routes
    read it; strict, it was a 422 (session 23's review). ``2.5`` stays a 422 (above)."""
    body = {"prompt": PROMPT, "temperature": 1.0, "top_k": 5, "seed": 7, "max_tokens": 3}
    ints = http.post("/v1/tasks/tmp", json=body)
    floats = http.post("/v1/tasks/tmp", json={**body, "max_tokens": 3.0, "top_k": 5.0,
                                              "seed": 7.0})
    assert ints.status_code == floats.status_code == 200, floats.text
    assert floats.json()["result"] == ints.json()["result"]  # the same seeded 3 tokens


def test_null_is_the_default_for_every_optional_field(http):
    """``"stream": null`` was a 422 and FIM's ``"suffix": null`` too, while ``null`` is the
    default for the sampling fields (session 40's QA): each is its field's default now."""
    body = {"prompt": PROMPT, "max_tokens": 3, "temperature": 0}
    plain = http.post("/v1/tasks/tmp", json=body)
    nulls = http.post("/v1/tasks/tmp", json={**body, "stream": None, "top_p": None})
    assert plain.status_code == nulls.status_code == 200, nulls.text
    assert nulls.json()["result"] == plain.json()["result"]  # a JSON reply, not a stream
    fim = {"prefix": "def f(x):", "max_tokens": 3, "temperature": 0}
    empty = http.post("/v1/tasks/fim", json={**fim, "suffix": ""})
    null = http.post("/v1/tasks/fim", json={**fim, "suffix": None})
    assert empty.status_code == null.status_code == 200, null.text
    assert null.json()["result"] == empty.json()["result"]


def test_a_trailing_slash_is_served_not_redirected(http):
    """``/v1/models/`` is ``/v1/models``: Starlette answered a 307 to a URL built from the
    Host header and the connection's scheme (plain http behind a TLS proxy), and a client
    that follows it sends its POST again (session 40's QA)."""
    host = {"Host": "example.com:443"}
    models = http.get("/v1/models/", headers=host)
    assert models.status_code == 200 and models.json()["data"], models.text
    r = http.post("/v1/tasks/tmp/", json={"prompt": PROMPT, "max_tokens": 2}, headers=host)
    assert r.status_code == 200 and "location" not in r.headers, r.text
    tid = r.json()["task_id"]
    assert http.get(f"/v1/tasks/{tid}/get_result//").json()["task_id"] == tid
    assert http.get("/health/").status_code == 200
    assert http.post("/v1/tasks/nothing-here/").status_code == 404


@pytest.mark.parametrize("ctype", [None, "text/plain", "application/octet-stream"])
@pytest.mark.parametrize("path", ["/v1/tasks/tmp", "/v1/tasks/fim",
                                  "/v1/tasks/TASK_x/continue"])
def test_a_body_of_other_bytes_than_utf8_without_json_type_is_a_422(http, path, ctype):
    """A body not sent as JSON is validated (and echoed in the 422) as its bytes; FastAPI's
    encoder decoded them as UTF-8, so any other byte made the error reply a 500 (session 54's
    review)."""
    headers = {"content-type": ctype} if ctype else {}
    r = http.post(path, content=b"\xff\xfe{", headers=headers)
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body"] and "Content-Type: application/json" in err["msg"], err
    assert err["input"] == "\ufffd\ufffd{"


@pytest.mark.parametrize("ctype", ["application/json; charset=utf-8", "Application/JSON",
                                   "application/vnd.api+json"])
def test_a_body_read_as_json_that_is_no_object_gets_no_content_type_hint(http, ctype):
    """A body FastAPI reads as JSON (any case, with parameters, ``application/*+json``) that is
    not an object is refused as one, not told to send Content-Type: application/json, which it
    did (a mutation review: the hint's own test of the type went unchecked for these)."""
    r = http.post("/v1/tasks/tmp", content=b'["x"]', headers={"content-type": ctype})
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body"] and err["input"] == ["x"], err
    assert "Content-Type" not in err["msg"], err


def test_other_bad_requests(http):
    r = http.post("/v1/tasks/create", content=b'{"prompt": "x",', headers={"content-type":
                                                                          "application/json"})
    assert r.status_code == 422 and "JSON" in r.text
    form = http.post("/v1/tasks/tmp", content=b'{"prompt": "x"}',  # curl -d without -H
                     headers={"content-type": "application/x-www-form-urlencoded"})
    assert form.status_code == 422
    assert "Content-Type: application/json" in form.json()["detail"][0]["msg"]
    assert "x-www-form-urlencoded" in form.json()["detail"][0]["msg"]
    _field_error(http.post("/v1/tasks/fim", json={"suffix": "x"}), "prefix")
    tid = create(http, max_tokens=1)["task_id"]
    # types naming "json" that FastAPI does not read as JSON: the same hint, not "Input
    # should be a valid dictionary" for a body that is one (the hint keyed on "json" in it)
    for ctype in ("text/json", "application/x-json", "application/jsonl"):
        r = http.post("/v1/tasks/tmp", content=b'{"prompt": "x"}', headers={"content-type": ctype})
        assert r.status_code == 422
        assert f"Content-Type: application/json (this request's: {ctype})" in \
            r.json()["detail"][0]["msg"], r.text
    _field_error(http.post(f"/v1/tasks/{tid}/continue", json={"top_p": -1}), "top_p")
    assert http.get(f"/v1/tasks/{tid}/stream", params={"pos": -1}).status_code == 422
    assert http.post(f"/v1/tasks/{tid}/fork", params={"tmp": "maybe"}).status_code == 422
    too_long = http.post("/v1/tasks/tmp", json={"prompt": [1] * 131073})
    assert too_long.status_code == 400 and "RWKV_MAX_PROMPT_TOKENS" in too_long.json()["detail"]
    # the sampling parameters are checked before the prompt is encoded (a long text was
    # encoded first, and its 400 hid the parameter's 422; session 34's review)
    for path in ("/v1/tasks/tmp", "/v1/tasks/create", f"/v1/tasks/{tid}/continue",
                 f"/v1/tasks/{tid}/fork"):
        _field_error(http.post(path, json={"prompt": [1] * 131073, "max_tokens": 40961}),
                     "max_tokens")
    _field_error(http.post("/v1/tasks/fim", json={"prefix": "x " * 140000,
                                                  "max_tokens": 40961}), "max_tokens")
    big = http.post("/v1/tasks/tmp", content=b"x" * (8 * 1024 * 1024 + 1))
    assert big.status_code == 413 and "RWKV_MAX_BODY_BYTES" in big.json()["detail"]
    # chunked bodies (no Content-Length) are measured as they arrive
    chunked = http.post("/v1/tasks/tmp", content=iter([b"x" * (1 << 20)] * 9))
    assert chunked.status_code == 413
    small = json.dumps({"prompt": PROMPT, "max_tokens": 2}).encode()
    ok = http.post("/v1/tasks/tmp", content=iter([small[:10], small[10:]]),
                   headers={"content-type": "application/json"})
    assert ok.status_code == 200 and wait_result(http, ok.json()["task_id"])["finished"]


@pytest.mark.parametrize("method,action", [
    ("GET", "get_result"), ("GET", "stream"), ("GET", "status"), ("POST", "fork"),
    ("POST", "continue"), ("POST", "stop"), ("POST", "as_template"), ("POST", "delete"),
])
def test_unknown_ids_are_404(http, method, action):
    for tid in ("TASK_" + "0" * 32, "TMP_nope", "_TMPL_missing"):
        r = http.request(method, f"/v1/tasks/{tid}/{action}")
        assert r.status_code == 404 and r.json() == {"detail": "Task not found"}


def test_bodies_nested_near_the_parsers_limit_are_never_a_500(http):
    """A prompt nested ~955 deep parsed, and its 422's echo of it did not encode
    (RecursionError: a 500; deeper bodies are a 400 from the parser); an assistant tool call
    whose arguments parsed at one depth more than they encoded was a 500 too (a review, session
    14). Every depth around the limit: 4xx for the Task API, never 5xx for the chat route."""
    limit = 1000  # the server's recursion limit (CPython's default); the window covers it
    for d in range(limit - 80, limit + 5, 1):
        nest = "[" * d + "]" * d
        r = http.post("/v1/tasks/tmp", content='{"prompt": ' + nest + "}",
                      headers={"content-type": "application/json"})
        assert 400 <= r.status_code < 500, (d, r.status_code, r.text[:200])
        call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": nest}}
        r = http.post("/v1/chat/completions", json={
            "messages": [{"role": "assistant", "content": None, "tool_calls": [call]},
                         {"role": "user", "content": "x"}], "max_tokens": 1})
        assert r.status_code < 500, (d, r.status_code, r.text[:200])


@pytest.mark.parametrize("path", ["/v1/tasks/tmp", "/v1/tasks/create", "/v1/chat/completions"])
@pytest.mark.parametrize("case", ["latin-1", "gzip", "deep"])
def test_a_body_that_is_no_utf8_json_says_why(http, path, case):
    """A body FastAPI's JSON reading failed on other than by a syntax error (bytes that are no
    UTF-8, a compressed body, nesting past the parser's depth) was a 400 "There was an error
    parsing the body" on the Task API, where API.md promises a 422 naming the problem and every
    other malformed body gets one (session 51's QA). Now a 422 ``json_invalid`` there, and the
    OpenAI routes' 400 says the same in OpenAI's shape."""
    import gzip

    doc = {"prompt": "x", "max_tokens": 1} if "tasks" in path else \
        {"messages": [{"role": "user", "content": "h\u00e9llo"}], "max_tokens": 1}
    headers = {"content-type": "application/json"}
    if case == "latin-1":
        body, why = json.dumps({**doc, "stop": ["\u00e9"]}, ensure_ascii=False).encode("latin-1"), \
            "not UTF-8"
    elif case == "gzip":
        body, why = gzip.compress(json.dumps(doc).encode()), "Content-Encoding: gzip"
        headers["content-encoding"] = "gzip"
    else:
        nest = "[" * 3000 + "]" * 3000
        body, why = (json.dumps(doc)[:-1] + f', "stop": {nest}}}').encode(), "nests too deeply"
    r = http.post(path, content=body, headers=headers)
    if "tasks" in path:
        assert r.status_code == 422, (r.status_code, r.text[:300])
        (err,) = r.json()["detail"]
        assert err["type"] == "json_invalid" and err["loc"] == ["body"] and why in err["msg"], err
    else:
        assert r.status_code == 400, (r.status_code, r.text[:300])
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and why in err["message"], err


def test_body_errors_are_named_for_what_they_are(http):
    """A review (session 51) of the test above's change: a JSON syntax error sent with a
    Content-Encoding header was named a compressed body on the chat route; a number too long
    to convert (Python's 4,300-digit limit) stayed FastAPI's 400 on the Task API; bytes that
    are UTF-8 but read as UTF-16 (NULs among the first four) were "not UTF-8"."""
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    r = http.post("/v1/chat/completions", content=b'{"messages": [],, "max_tokens": 1}',
                  headers=headers)
    assert r.status_code == 400 and "Expecting property name" in r.json()["error"]["message"]
    long_number = b'{"prompt": "x", "max_tokens": ' + b"1" * 5000 + b"}"
    r = http.post("/v1/tasks/tmp", content=long_number,
                  headers={"content-type": "application/json"})
    assert r.status_code == 422, (r.status_code, r.text[:200])
    (err,) = r.json()["detail"]
    assert err["type"] == "json_invalid" and "digits" in err["msg"], err
    r = http.post("/v1/tasks/tmp", content=b'{\x00"\x00\x00',
                  headers={"content-type": "application/json"})
    (err,) = r.json()["detail"]
    assert r.status_code == 422 and "not UTF-8" not in err["msg"] and "utf-16" in err["msg"]


def test_still_serving_after_errors(http):
    test_other_bad_requests(http)
    assert http.get("/health").json()["scheduler_alive"] is True
    r = create(http, "/v1/tasks/tmp", max_tokens=4)
    assert wait_result(http, r["task_id"])["finished"]


# ---- security and admission ---------------------------------------------------------------------
def test_missing_model_fails_fast(tmp_path):
    from server_harness import ROOT, SERVER_ENV, free_port

    cmd = [sys.executable, "run.py", "--model", str(tmp_path / "nope.pth"), "--port",
           str(free_port())]
    env = {**os.environ, **SERVER_ENV}
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "Traceback" not in out
    assert "nope.pth" in out and "huggingface" in out.lower() and "--demo" in out
    cmd[3] = str(tmp_path)  # a directory: said so (it was "Model file not found"; session 22)
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode == 2 and "Traceback" not in out and "is a directory" in out, out[-2000:]


@pytest.mark.parametrize("env,named", [
    ({"RWKV_DEVICE": "cuda:x"}, "RWKV_DEVICE"),  # passed a prefix check, then a traceback
    ({"RWKV_DEVICE": "cuda:99"}, "RWKV_DEVICE"),  # no such device (or no CUDA at all)
    ({"RWKV_VOCAB_PATH": "/nonexistent/vocab.txt"}, "RWKV_VOCAB_PATH"),
    # files that are no vocabulary were a traceback after the model loaded (session 23's QA)
    ({"RWKV_VOCAB_PATH": "README.md"}, "README.md:1: unparsable vocabulary line"),
    ({"RWKV_VOCAB_PATH": "{tmp}/empty.txt"}, "empty.txt: no vocabulary lines"),
    ({"RWKV_VOCAB_PATH": "{tmp}/binary.txt"}, "binary.txt: not UTF-8 text"),
    ({"RWKV_VOCAB_PATH": "{tmp}"}, "is a directory"),
    ({"RWKV_VOCAB_PATH": "{tmp}/dict.txt"}, "dict.txt:1: unparsable vocabulary line"),
])
def test_unusable_device_or_vocabulary_fails_fast(tmp_path, env, named):
    """One line naming the variable, not a traceback after the model is loaded (a review,
    session 14)."""
    from server_harness import ROOT, SERVER_ENV, free_port

    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "dict.txt").write_text("1 {[]: 1} 1\n")  # a TypeError in literal_eval
    (tmp_path / "binary.txt").write_bytes(b"0 '\xff\xfe' 2\n\x80\x81")
    env = {k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()}
    cmd = [sys.executable, "run.py", "--demo", "tiny", "--port", str(free_port())]
    p = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **SERVER_ENV, **env},
                       capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "Traceback" not in out and named in out, out[-2000:]
    assert "loaded" not in out  # before the model


def test_file_that_is_no_checkpoint_fails_fast(tmp_path):
    """``run.py --model`` naming a file that is not an RWKV-7 checkpoint (text; a state dict of
    another model): one error line and exit code 2 before the server starts (uvicorn printed a
    start-up traceback and exited with 3)."""
    import torch
    from server_harness import ROOT, SERVER_ENV, free_port

    other = tmp_path / "other.pth"
    torch.save({"weight": torch.zeros(2, 2)}, other)
    for path, says in ((ROOT / "README.md", "cannot read"), (other, "rwkv")):
        cmd = [sys.executable, "run.py", "--model", str(path), "--port", str(free_port())]
        env = {**os.environ, **SERVER_ENV}
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        out = p.stdout + p.stderr
        assert p.returncode == 2 and "Traceback" not in out and "Uvicorn running" not in out
        assert "Cannot load the model" in out and says in out.lower() and path.name in out


def test_unusable_task_database_fails_fast(tmp_path):
    """A task database that cannot be opened (not SQLite, another program's ``tasks`` table, a
    directory): one line naming the file and RWKV_TASK_DB_PATH, exit code 2, before the model
    loads (it was a 46-line start-up traceback after it, naming neither; session 22)."""
    import sqlite3

    from server_harness import ROOT, SERVER_ENV, free_port

    text = tmp_path / "text.db"
    text.write_text("not a database\n" * 200)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE tasks (id INTEGER, name TEXT)")
    under_a_file = text / "tasks.db"  # its folder cannot be made: a traceback (session 25)
    for path, says in ((text, "not a database"), (other, "columns"), (tmp_path, "is a directory"),
                       (under_a_file, "cannot be made")):
        env = {**os.environ, **SERVER_ENV, "RWKV_TASK_DB_PATH": str(path)}
        cmd = [sys.executable, "run.py", "--demo", "tiny", "--port", str(free_port())]
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        out = p.stdout + p.stderr
        assert p.returncode == 2 and "Traceback" not in out and "Loading" not in out, out[-2000:]
        assert str(path) in out and "RWKV_TASK_DB_PATH" in out and says in out, out[-2000:]


def test_unknown_demo_preset_fails_fast():
    """``run.py --demo PRESET`` with a preset that does not exist: one line naming the presets and
    exit code 2, before the server starts (not a start-up traceback)."""
    from server_harness import ROOT, SERVER_ENV, free_port

    cmd = [sys.executable, "run.py", "--demo", "3b", "--port", str(free_port())]
    env = {**os.environ, **SERVER_ENV}
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode == 2 and "Traceback" not in out and "Uvicorn running" not in out
    assert "'3b'" in out and "tiny" in out and "2.9b" in out
    # --model beside --demo was ignored: the demo served (session 25's QA)
    cmd = [sys.executable, "run.py", "--demo", "--model", "x.pth", "--port", str(free_port())]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--model and --demo exclude each other" in p.stderr, p.stderr


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
                       RWKV_CORS_ORIGINS="https://ok.example", RWKV_MAX_TOKENS_CAP="50000")
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
        # a cap above the Task API's 0…40960 raises its range to the cap (tasks below are
        # past 40960), and past it is a 422 naming the field
        over = c.post("/v1/tasks/tmp", json={"prompt": PROMPT, "max_tokens": 50001}, headers=auth)
        _field_error(over, "max_tokens")
        assert "50000" in json.dumps(over.json())
        # one slot, one waiting place: the third long task is refused with Retry-After
        body = {"prompt": PROMPT, "max_tokens": 45000}
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


def test_text_past_a_small_checkpoint_vocabulary_is_a_4xx(start_server, tmp_path):
    """A checkpoint with fewer tokens than the tokenizer (the random generator's --vocab) is
    served; text that tokenizes past its vocabulary was a 500 from the first model pass (a
    review, session 14). Text that fits still runs."""
    import torch

    from server.model.random import make_random_state_dict

    path = tmp_path / "v300.pth"
    torch.save(make_random_state_dict(2, 128, 300, seed=3), path)
    srv = start_server(model=path)
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        far = "Hello, world"  # tokens past 300
        r = c.post("/v1/completions", json={"prompt": far, "max_tokens": 2})
        assert r.status_code == 400 and r.json()["error"]["param"] == "prompt", r.text
        assert "vocabulary [0, 300)" in r.json()["error"]["message"]
        r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": far}],
                                                 "max_tokens": 2})
        assert r.status_code == 400 and r.json()["error"]["param"] == "messages", r.text
        r = c.post("/v1/tasks/tmp", json={"prompt": far, "max_tokens": 2})
        assert r.status_code == 422 and "vocabulary" in r.text
        r = c.post("/v1/completions", json={"prompt": "a", "max_tokens": 2})  # one byte token
        assert r.status_code == 200, r.text
    srv.stop()


def test_port_in_use_fails_before_the_model_loads():
    """A port another process listens on: one line naming it, before the model is loaded
    (uvicorn binds after the app's start-up: the error came after minutes of loading, a review,
    session 14)."""
    import socket

    from server_harness import ROOT, SERVER_ENV

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cmd = [sys.executable, "run.py", "--demo", "tiny", "--host", "127.0.0.1", "--port",
               str(port)]
        p = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **SERVER_ENV}, capture_output=True,
                           text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode == 2 and "Traceback" not in out, out[-2000:]
    assert f"127.0.0.1:{port}" in out and "RWKV_PORT" in out and "in use" in out, out[-2000:]
    assert "loaded" not in out  # the loader's line: it never ran


def test_a_state_import_has_room_for_the_models_state(start_server):
    """``/v1/tasks/import_state`` takes a state file of the loaded model whatever
    RWKV_MAX_BODY_BYTES (a 2.9B export, ~21 MB, was a 413 at the default 8 MiB: an export could
    not be imported back; session 23's QA); other routes keep the limit, and a body past the
    model's state size is still refused."""
    srv = start_server(RWKV_MAX_BODY_BYTES="4096")
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        tid = c.post("/v1/tasks/create", json={"prompt": PROMPT, "max_tokens": 0}).json()["task_id"]
        deadline = time.monotonic() + 30
        while not c.get(f"/v1/tasks/{tid}/get_result").json()["finished"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        exported = c.get(f"/v1/tasks/{tid}/export_state").content
        assert len(exported) > 4096
        r = c.post("/v1/tasks/import_state", params={"name": "_back"}, content=exported)
        assert r.status_code == 200, r.text
        big = c.post("/v1/tasks/tmp", json={"prompt": "x" * 5000, "max_tokens": 1})
        assert big.status_code == 413 and "4096 bytes" in big.json()["detail"]
        huge = c.post("/v1/tasks/import_state", params={"name": "_huge"},
                      content=b"\0" * (len(exported) + (17 << 20)))
        assert huge.status_code == 413
        # it names the rule that set its limit, not RWKV_MAX_BODY_BYTES (session 40's QA)
        why = huge.json()["detail"]
        assert "a state file of this model" in why and "RWKV_MAX_BODY_BYTES" not in why
    srv.stop()


def test_a_state_beyond_the_servers_state_dtype_is_a_422(start_server):
    """A state-tuning file whose values overflow float16, imported into a server keeping its
    WKV state in fp16, was stored; every request from it then ran on infinite state (garbled
    or empty text with a 200). The import is a 422 naming the tensor and the setting."""
    import io

    import torch

    def tuning(value: float) -> bytes:  # the tiny model: 2 layers of 2 heads
        buf = io.BytesIO()
        torch.save({f"blocks.{i}.att.time_state": torch.full((2, 64, 64), value)
                    for i in range(2)}, buf)
        return buf.getvalue()

    srv = start_server(RWKV_STATE_DTYPE="fp16")
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        r = c.post("/v1/tasks/import_state", params={"name": "_big"}, content=tuning(7.0e4))
        assert r.status_code == 422, r.text
        assert "wkv values reach 7e+04, beyond torch.float16" in r.json()["detail"]
        assert "RWKV_STATE_DTYPE=fp32" in r.json()["detail"]
        assert c.get("/v1/tasks/_big/status").status_code == 404
        # within float16, but the model's first steps from it overflow (session 71: stored,
        # each request from it was a 500): the import's trial refuses it
        r = c.post("/v1/tasks/import_state", params={"name": "_fits"}, content=tuning(6.0e4))
        assert r.status_code == 422 and "NaN or infinite" in r.json()["detail"], r.text
        r = c.post("/v1/tasks/import_state", params={"name": "_fits"}, content=tuning(1.0))
        assert r.status_code == 200, r.text
    srv.stop()


def test_a_body_of_many_unknown_fields_gets_a_short_422_at_once(http):
    """A Task API body with 100,000 unknown fields got a 10 MB 422 listing each, its encoding
    holding the event loop (every other client) for seconds (session 41's QA). The reply lists
    the first 20 and says how many more there were."""
    body = {"prompt": PROMPT, "max_tokens": 1, **{f"u{i}": 1 for i in range(5000)}}
    r = http.post("/v1/tasks/tmp", json=body)
    assert r.status_code == 422 and len(r.content) < 10_000
    detail = r.json()["detail"]
    assert len(detail) == 21 and [e["loc"] for e in detail[:2]] == [["body", "u0"], ["body", "u1"]]
    assert detail[-1]["type"] == "too_many_errors" and "4980 more errors" in detail[-1]["msg"]


def test_an_imported_states_history_counts_as_a_prompt(start_server, tiny_model_path):
    """A state file may carry any history: an 8M-token one in 16 MB was imported, and each fork
    of it held ~170 MB (session 41's QA). Past RWKV_MAX_PROMPT_TOKENS it is a 400 naming the
    limit, as its tokens not yet consumed were."""
    from server.model.checkpoint import infer_config, load_checkpoint
    from server.model.state import State
    from server.task.state_file import encode_state_file

    cfg = infer_config(load_checkpoint(tiny_model_path)[0])
    state = State.zeros(cfg, 1, "cpu", torch.float32, torch.float32)
    srv = start_server(RWKV_MAX_PROMPT_TOKENS="64")
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        for n, name in ((64, "_fits"), (65, "_long")):
            data = encode_state_file(state, cfg, history=list(range(1000, 1000 + n)))
            r = c.post("/v1/tasks/import_state", params={"name": name}, content=data)
            if n == 64:
                assert r.status_code == 200 and r.json()["history_tokens"] == 64, r.text
            else:
                assert r.status_code == 400 and "65 tokens of history" in r.text
                assert "RWKV_MAX_PROMPT_TOKENS" in r.text
        assert c.get("/v1/tasks/_long/status").status_code == 404
    srv.stop()


def test_an_unreadable_stored_record_says_so_and_can_be_deleted(server, http):
    """A row another version wrote, or a damaged one: reading it is a 500 saying the record
    cannot be read (it was "Internal server error: KeyError"), and delete removes it (it was a
    500 too, the row kept; session 25's QA)."""
    import sqlite3
    import time

    with sqlite3.connect(server.db_path) as db:
        for tid, meta in (("TASK_badjson", "{not json"), ("TASK_badkeys", '{"version": 1}'),
                          ("_badtemplate", '{"version": 1}')):
            db.execute("INSERT INTO tasks (task_id, is_template, updated_at, meta, blob) "
                       "VALUES (?, ?, ?, ?, NULL)", (tid, int(tid[0] == "_"), time.time(), meta))
    for tid in ("TASK_badjson", "TASK_badkeys", "_badtemplate"):
        r = http.get(f"/v1/tasks/{tid}/get_result")
        assert r.status_code == 500 and "cannot be read" in r.text, r.text
    assert http.post("/v1/tasks/_badtemplate/delete").status_code == 403  # still protected
    for tid, query in (("TASK_badjson", ""), ("TASK_badkeys", ""), ("_badtemplate", "?force=true")):
        r = http.post(f"/v1/tasks/{tid}/delete{query}")
        assert r.status_code == 200 and r.json()["task_id"] == tid, r.text
        assert http.get(f"/v1/tasks/{tid}/status").status_code == 404
    deadline = time.monotonic() + 10  # (the rows go on the writer's thread)
    while True:
        with sqlite3.connect(server.db_path) as db:
            left = db.execute("SELECT task_id FROM tasks WHERE task_id IN "
                              "('TASK_badjson', 'TASK_badkeys', '_badtemplate')").fetchall()
        if not left:
            break
        assert time.monotonic() < deadline, left
        time.sleep(0.05)


def test_a_refused_value_too_large_to_echo_is_shown_by_its_size(http):
    """A 422 echoed the refused value whole: a logit_bias of 5,000 entries (refused for its count)
    or a 1 MB string for a number came back in the reply. Now a value past ~2,000 characters
    is a note of its kind and size; a small one is echoed as before."""
    bias = {str(i): 1 for i in range(5000)}
    r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, "max_tokens": 1, "logit_bias": bias})
    assert r.status_code == 422 and len(r.content) < 2_000, r.text[:300]
    err = r.json()["detail"][0]
    assert "5000 entries; at most 300" in err["msg"]
    assert err["input"] == "(dict of 5,000 entries: too large to echo)"
    r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, "max_tokens": "x" * 1_000_000})
    assert r.status_code == 422 and len(r.content) < 2_000, r.text[:300]
    assert r.json()["detail"][0]["input"] == "(str of 1,000,000 characters: too large to echo)"
    r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, "max_tokens": "short"})
    assert r.status_code == 422 and r.json()["detail"][0]["input"] == "short"


def test_review_a_huge_integer_is_not_echoed_whole(http):
    """(review) a 4,000-digit integer for a bounded number (JSON reads up to 4,300 digits) came
    back whole in the 422: ``_echo_fits`` counted any number as 8 characters."""
    body = '{"prompt": %s, "max_tokens": %s}' % (json.dumps(PROMPT), "9" * 4000)
    r = http.post("/v1/tasks/tmp", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text[:300]
    assert len(r.content) < 2_500, (len(r.content), r.text[:200])
    assert r.json()["detail"][0]["input"] == "(int of 4,000 digits: too large to echo)"
    r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, "max_tokens": 10 ** 30})
    assert r.status_code == 422 and r.json()["detail"][0]["input"] == 10 ** 30


def test_review_a_huge_unknown_field_name_is_not_echoed_whole(http):
    """(review) an unknown field whose name is 1 MB: its 422 echoed the name whole in ``loc``
    (the reply 1 MB); a short name is shown as it is."""
    r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, "k" * 1_000_000: 1})
    assert r.status_code == 422, r.text[:300]
    assert len(r.content) < 2_500, (len(r.content), r.text[:200])
    assert r.json()["detail"][0]["loc"] == ["body", "k" * 40 + "... (1,000,000 characters)"]
    r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, "temprature": 1})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "temprature"]


# ---- from session 55's mutation testing: behaviour no test pinned down ------------------------
def test_a_refused_value_holding_a_large_one_is_shown_by_its_size(http):
    """A small container is no small value when what it holds is large: a list or an object
    holding a 1 MB string (as a value or as a key) is a note of its kind and size, not echoed
    whole (mutations that left a dict's keys, a dict's values or a list's items out of the
    count each sent the 1 MB back, and no test failed: session 55's mutation testing)."""
    big = "x" * 1_000_000
    for value, note in (([big, 1, 2], "(list of 3 entries: too large to echo)"),
                        ({"k": big}, "(dict of 1 entries: too large to echo)"),
                        ({big: 1}, "(dict of 1 entries: too large to echo)"),
                        ([[["y", big]]], "(list of 1 entries: too large to echo)")):
        r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, "max_tokens": value})
        assert r.status_code == 422 and len(r.content) < 2_500, (len(r.content), r.text[:200])
        assert r.json()["detail"][0]["input"] == note, r.text[:300]
    small = [{"a": "b"}, [1, 2]]  # (echoed as sent)
    r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, "max_tokens": small})
    assert r.status_code == 422 and r.json()["detail"][0]["input"] == small, r.text


def test_a_refused_container_of_about_the_budgets_length_is_never_echoed_whole(http):
    """However many entries a refused list or object has, its reply stays small when its
    entries are large: at every count about the echo budget (~2,000), one at which its own
    length used the budget up exactly was echoed whole with its 1 MB of entries by a mutation
    (``budget > 0`` for ``budget >= 0`` before a list's entries are walked), and no test
    failed (session 55's mutation testing)."""
    entry = "x" * 500
    for n in range(1_996, 2_002):
        for value in ([entry] * n, {f"{i:0500d}": 0 for i in range(n)}):
            r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, "max_tokens": value})
            assert r.status_code == 422 and len(r.content) < 2_500, (n, len(r.content))
            assert r.json()["detail"][0]["input"].endswith(
                f" of {n:,} entries: too large to echo)"), r.text[:300]


def test_the_echo_budget_is_about_two_thousand_characters(http):
    """The budget of a refused value echoed whole is ~2,000 characters (``MAX_ECHO``): a string
    of 1,500 comes back as sent, one of 2,500 as a note of its size. A budget of 40 (a short
    number's field echoing none of a mistyped sentence) or 3,900 (a 422 twice the size) failed
    no test (session 55's mutation testing)."""
    for n, echoed in ((1_500, True), (2_500, False)):
        r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, "max_tokens": "x" * n})
        assert r.status_code == 422, r.text[:300]
        shown = r.json()["detail"][0]["input"]
        assert shown == ("x" * n if echoed else f"(str of {n:,} characters: too large to echo)")


def test_an_unknown_field_name_is_cut_past_two_hundred_characters(http):
    """An unknown field's name in a 422's ``loc`` is shown whole up to ``MAX_LOC_KEY`` (200)
    characters and cut past it: neither bound was pinned (200 to 2,000, or to 20: no test
    failed; session 55's mutation testing)."""
    for n in (30, 200, 201):
        name = "k" * n
        r = http.post("/v1/tasks/tmp", json={"prompt": PROMPT, name: 1})
        assert r.status_code == 422, r.text[:300]
        want = name if n <= 200 else "k" * 40 + f"... ({n:,} characters)"
        assert r.json()["detail"][0]["loc"] == ["body", want]


def test_exactly_twenty_errors_get_no_note_of_more(http):
    """A 422 lists up to ``MAX_ERRORS`` (20) errors; a note of how many more comes only past
    them: 20 unknown fields are 20 errors and no note ("... and 0 more errors" with ``>=``: no
    test failed), 21 are 20 and "1 more error" (singular)."""
    from server.api.safe_json import MAX_ERRORS

    for n, more in ((MAX_ERRORS, None), (MAX_ERRORS + 1, "... and 1 more error of this")):
        body = {"prompt": PROMPT, "max_tokens": 1, **{f"u{i}": 1 for i in range(n)}}
        r = http.post("/v1/tasks/tmp", json=body)
        assert r.status_code == 422, r.text[:300]
        detail = r.json()["detail"]
        notes = [e for e in detail if e["type"] == "too_many_errors"]
        assert len(detail) == MAX_ERRORS + (more is not None), detail
        assert [e["msg"] for e in notes] == ([] if more is None else [
            f"{more} request (the first {MAX_ERRORS} shown)"]), notes
