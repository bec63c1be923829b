"""OpenAI-compatible API against the real server (``python run.py``) on a random tiny checkpoint.

Driven by the official ``openai`` SDK and by raw HTTP (SSE framing). Exact checks come from
determinism: a seeded request always yields the same tokens, so a chat reply can be compared
with the raw completion of the same prompt, a stop-cut reply with the uncut one, a stream with
the non-stream reply, and choice ``j`` of ``n`` with a single request seeded ``seed + j``.
"""

import json
import socket
import time

import httpx
import openai
import pytest

from server.api.chat import build_chat_prompt, fim_prompt
from openai_helpers import sdk, stream_chunks  # noqa: F401 (a fixture)

MSGS = [{"role": "user", "content": "Tell me a story."}]
DIRECT = dict(reasoning_effort="none")
SAMPLE = dict(model="rwkv-7", temperature=1.0, top_p=1.0, max_tokens=12, seed=11)
ERROR_KEYS = {"message", "type", "param", "code"}


def chat(sdk, **kw):
    return sdk.chat.completions.create(**{"messages": MSGS, **SAMPLE, **kw})


def assert_error(r: httpx.Response, status: int, code=None, param=None) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == ERROR_KEYS
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code
    if param is not None:
        assert body["error"]["param"] == param
    return body["error"]


def assert_refused_on_both(http, field: str, value, words: str | None = None) -> None:
    """A completion and a chat request with ``field`` = ``value`` are 400s naming ``field``
    (and saying ``words``)."""
    for path, body in (("/v1/completions", {"prompt": "x"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user",
                                                               "content": "x"}]})):
        err = assert_error(http.post(path, json={**body, field: value}), 400, param=field)
        assert words is None or words in err["message"], err["message"]


# ---- connecting (cases 1-3) -----------------------------------------------------------------------
def test_models_list_and_retrieve(sdk, http):
    raw = http.get("/v1/models").json()
    assert raw["object"] == "list"
    # from the file name (then templates, if an earlier test stored one)
    assert [m["id"] for m in raw["data"]][:2] == ["rwkv7-tiny-random", "rwkv-7"]
    for m in raw["data"]:
        assert set(m) == {"id", "object", "created", "owned_by"} and m["object"] == "model"
        assert isinstance(m["created"], int) and m["created"] > 0
    assert [m.id for m in sdk.models.list()][:2] == ["rwkv7-tiny-random", "rwkv-7"]
    assert sdk.models.retrieve("rwkv-7").id == "rwkv-7"
    assert_error(http.get("/v1/models/gpt-4"), 404, code="model_not_found")
    # "<model>:_name" names a stored state template (chat and completions accept it)
    src = http.post("/v1/tasks/create", json={"prompt": "System: be brief.\n\n",
                                              "max_tokens": 0}).json()["task_id"]
    tpl = http.post(f"/v1/tasks/{src}/as_template").json()["task_id"]
    assert sdk.models.retrieve(f"rwkv-7:{tpl}").id == f"rwkv-7:{tpl}"
    assert_error(http.get("/v1/models/rwkv-7:_nope"), 404, code="model_not_found")
    # and the list names every template after the model (a UI picks a model from it)
    ids = [m.id for m in sdk.models.list()]
    assert ids[:2] == ["rwkv7-tiny-random", "rwkv-7"] and f"rwkv-7:{tpl}" in ids[2:]
    assert all(i.startswith("rwkv-7:_") for i in ids[2:])


def test_unknown_paths_and_methods_are_openai_errors(sdk, http):
    # FastAPI answered {"detail": "Not Found"}: the SDK's message was a bare "Error code: 404"
    with pytest.raises(openai.NotFoundError) as e:
        sdk.embeddings.create(model="rwkv-7", input="x")
    assert "/v1/embeddings" in e.value.message
    assert "/v1/embeddings" in assert_error(http.post("/v1/embeddings", json={}), 404)["message"]
    assert "GET" in assert_error(http.get("/v1/chat/completions"), 405)["message"]
    assert http.get("/v1/chat/completions").headers["allow"] == "POST"
    r = http.get("/v1/tasks/TMP_x/nothing")  # the Task API keeps FastAPI's shape
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}


def test_head_is_get_without_the_body(http):
    """Probes and link checkers send HEAD; FastAPI's routes answered it 405."""
    get, head = http.get("/v1/models"), http.head("/v1/models")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == "application/json"
    assert int(head.headers["content-length"]) == len(get.content) > 0
    missing = http.head("/v1/models/gpt-4")
    assert missing.status_code == 404 and missing.content == b""
    post_only = http.head("/v1/chat/completions")  # no GET route: still 405
    assert post_only.status_code == 405 and post_only.headers["allow"] == "POST"
    assert post_only.content == b""
    assert http.get("/v1/models").status_code == 200  # the connection is still good


def raw_status(url: str, request: bytes) -> int:
    """Send bytes as they are (httpx refuses a header value with a trailing space)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request)
        return int(s.recv(64).split()[1])


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer x"}])
def test_any_key_accepted_without_server_key(http, server, headers):
    assert http.get("/v1/models", headers=headers).status_code == 200
    r = http.post("/v1/chat/completions", headers=headers,
                  json={"messages": MSGS, "max_tokens": 1})
    assert r.status_code == 200, r.text
    body = json.dumps({"messages": MSGS, "max_tokens": 1}).encode()
    assert raw_status(server.url, b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\n"
                      b"Authorization: Bearer \r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                      % (len(body), body)) == 200  # Open WebUI's empty key


def test_cors_preflight_and_error_replies(http):
    asked = "authorization, content-type, x-stainless-os, x-stainless-retry-count"
    r = http.options("/v1/chat/completions", headers={
        "Origin": "https://chat.example.com", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": asked, "Access-Control-Request-Private-Network": "true"})
    assert r.status_code in (200, 204)
    assert r.headers["access-control-allow-origin"] in ("*", "https://chat.example.com")
    assert "POST" in r.headers["access-control-allow-methods"]
    assert r.headers["access-control-allow-headers"].lower() == asked
    assert r.headers["access-control-allow-private-network"] == "true"
    bad = http.post("/v1/chat/completions", headers={"Origin": "https://chat.example.com"},
                    json={"messages": MSGS, "temperature": 9})
    assert_error(bad, 400, param="temperature")
    assert "access-control-allow-origin" in bad.headers


# ---- requests (cases 4-5) -------------------------------------------------------------------------
def test_client_extras_are_accepted(http, tiny_loader):
    messages = [
        {"role": "developer", "content": "Be kind."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": "<think>hmm</think>Hello!", "reasoning_content": "x"},
        {"role": "assistant", "content": None},
        {"role": "user", "content": "Again"}]
    body = {"model": "gpt-4o", "messages": messages, "user": {"id": "u1", "name": "webui"},
            "logit_bias": {}, "seed": None, "logprobs": None, "response_format": {"type": "text"},
            "parallel_tool_calls": True, "reasoning_effort": "none", "top_k": 5, "min_p": 0.1,
            "max_completion_tokens": 3, "max_tokens": 50, "n": 1, "stop": "zzqq",
            "tool_choice": "auto", "frequency_penalty": 0.5, "presence_penalty": -1, "penalty_decay": 0.99}
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["model"] == "gpt-4o"  # any model id is served by the loaded model
    assert out["usage"]["completion_tokens"] <= 3  # max_completion_tokens wins over max_tokens
    prompt = ("System: Be kind.\n\nUser: Hi\n\nAssistant: Hello!\n\nUser: Again\n\n"
              "Assistant: <think>\n</think")
    assert out["usage"]["prompt_tokens"] == len(tiny_loader.encode(prompt))
    r = http.post("/v1/chat/completions", json={**body, "stop": ["a", "b"], "user": "str",
                                                "tool_choice": {"type": "function", "function": {"name": "f"}}})
    assert r.status_code == 200, r.text  # tool_choice without tools: ignored


def test_image_part_is_refused(sdk):
    with pytest.raises(openai.BadRequestError) as e:
        chat(sdk, messages=[{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])
    assert "image" in e.value.message.lower() and e.value.param == "messages.0.content.1"


# ---- replies (cases 6-9) --------------------------------------------------------------------------
def test_chat_non_stream_shape_and_usage(http, tiny_loader):
    r = http.post("/v1/chat/completions", json={"messages": MSGS, **SAMPLE, **DIRECT})
    body = r.json()
    assert set(body) == {"id", "object", "created", "model", "choices", "usage"}
    assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert isinstance(body["created"], int) and body["model"] == "rwkv-7"
    (choice,) = body["choices"]
    assert set(choice) == {"index", "message", "logprobs", "finish_reason"}
    assert choice["index"] == 0 and choice["logprobs"] is None
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    assert "reasoning_content" not in choice["message"]
    usage = body["usage"]
    assert usage["prompt_tokens"] == len(tiny_loader.encode(build_chat_prompt(MSGS, think=False)))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert choice["finish_reason"] in ("stop", "length")
    if choice["finish_reason"] == "length":
        assert usage["completion_tokens"] == SAMPLE["max_tokens"]


def test_n_and_seed(sdk):
    both = chat(sdk, n=2, **DIRECT)
    assert [c.index for c in both.choices] == [0, 1]
    texts = [c.message.content for c in both.choices]
    assert texts[0] != texts[1]
    assert chat(sdk, **DIRECT).choices[0].message.content == texts[0]
    assert chat(sdk, **{**DIRECT, "seed": SAMPLE["seed"] + 1}).choices[0].message.content == texts[1]
    assert both.usage.completion_tokens == 2 * chat(sdk, **DIRECT).usage.completion_tokens


def test_stream_framing_and_same_text(http, sdk):
    full = chat(sdk, **DIRECT).choices[0]
    chunks = stream_chunks(http, "/v1/chat/completions", {"messages": MSGS, **SAMPLE, **DIRECT})
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:])
    assert len({(c["id"], c["created"], c["model"]) for c in chunks}) == 1
    assert all(c["object"] == "chat.completion.chunk" and "usage" not in c for c in chunks)
    assert all(len(c["choices"]) == 1 and "delta" in c["choices"][0] for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"][0]["delta"] == {}
    assert chunks[-1]["choices"][0]["finish_reason"] == full.finish_reason
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == full.message.content
    sdk_text = "".join(c.choices[0].delta.content or "" for c in chat(sdk, stream=True, **DIRECT))
    assert sdk_text == text


def test_stream_include_usage(http, sdk):
    usage = chat(sdk, **DIRECT).usage
    chunks = stream_chunks(http, "/v1/chat/completions", {
        "messages": MSGS, **SAMPLE, **DIRECT, "stream_options": {"include_usage": True}})
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == usage.model_dump(exclude_none=True)
    last = list(chat(sdk, stream=True, stream_options={"include_usage": True}, **DIRECT))[-1]
    assert last.usage.completion_tokens == usage.completion_tokens
    # a boolean: "false" is false (it was read for truthiness: usage came), a non-boolean a 400
    no = stream_chunks(http, "/v1/chat/completions", {
        "messages": MSGS, **SAMPLE, **DIRECT, "stream_options": {"include_usage": "false"}})
    assert no[-1]["choices"] and "usage" not in no[-1]
    r = http.post("/v1/chat/completions", json={"messages": MSGS, **DIRECT, "stream": True,
                                                "stream_options": {"include_usage": "maybe"}})
    assert "include_usage" in assert_error(r, 400, param="stream_options")["message"]


def test_usage_counts_the_tokens_a_template_has_not_fed(http, tiny_loader):
    """A request from a state template feeds the template's not yet fed tokens (an imported
    state exported mid-prompt: its ``pending``; a ``max_tokens: 0`` template: its last prompt
    token) before its own prompt; ``usage.prompt_tokens`` counted only the request's (a QA
    report, session 27). It counts what the model is fed, in the body and the usage chunk (an
    empty prompt without a template: the end-of-text token)."""
    from server.model.state import State
    from server.task.state_file import encode_state_file

    held = 5
    data = encode_state_file(State.zeros(tiny_loader.cfg, 1), tiny_loader.cfg, pending=[11] * held)
    r = http.post("/v1/tasks/import_state", params={"name": "_usage_held"}, content=data)
    assert r.status_code == 200, r.text
    src = http.post("/v1/tasks/create", json={"prompt": "System: be brief.\n\n",
                                              "max_tokens": 0}).json()["task_id"]
    made = http.post(f"/v1/tasks/{src}/as_template").json()["task_id"]
    own = len(tiny_loader.encode(build_chat_prompt(MSGS, think=False)))
    try:
        for model, head in (("rwkv-7:_usage_held", held), (f"rwkv-7:{made}", 1)):
            body = {**SAMPLE, **DIRECT, "model": model, "max_tokens": 2}
            chat = http.post("/v1/chat/completions", json={"messages": MSGS, **body}).json()
            assert chat["usage"]["prompt_tokens"] == own + head, (model, chat)
            streamed = stream_chunks(http, "/v1/chat/completions", {
                "messages": MSGS, **body, "stream_options": {"include_usage": True}})
            assert streamed[-1]["usage"] == chat["usage"]
            # per prompt (not per choice, as OpenAI counts), an empty prompt its head alone
            prompts = ["Once upon", "The end", ""]
            comp = {**body, "prompt": prompts, "n": 2}
            want = sum(len(tiny_loader.encode(p)) + head for p in prompts)
            usage = http.post("/v1/completions", json=comp).json()["usage"]
            assert usage["prompt_tokens"] == want, (model, usage)
            streamed = stream_chunks(http, "/v1/completions", {
                **comp, "stream_options": {"include_usage": True}})
            assert streamed[-1]["usage"]["prompt_tokens"] == want
        # without a template an empty prompt starts a document: the end-of-text token it is
        # fed counts, as OpenAI counts it (it said 0: session 37's QA)
        for prompt in ("", [[]], ["", "x"]):
            comp = {**SAMPLE, "prompt": prompt, "max_tokens": 1}
            want = 1 + (len(tiny_loader.encode("x")) if prompt == ["", "x"] else 0)
            usage = http.post("/v1/completions", json=comp).json()["usage"]
            assert usage["prompt_tokens"] == want, (prompt, usage)
    finally:
        for tid in ("_usage_held", made):
            http.post(f"/v1/tasks/{tid}/delete", params={"force": "true"})


def test_reasoning_content_is_split_out(sdk, http):
    # the same seeded generation seen raw (completion of the chat prompt) and through the chat route
    raw = sdk.completions.create(prompt=build_chat_prompt(MSGS, think=True), **SAMPLE)
    text = raw.choices[0].text
    expected = (text[1:] if text.startswith(">") else text).lstrip()
    assert "</think>" not in expected and "\n\nUser:" not in expected  # random weights
    msg = chat(sdk).choices[0].message  # RWKV_CHAT_THINK is on in this server
    assert msg.content == "" and msg.reasoning_content == expected
    chunks = stream_chunks(http, "/v1/chat/completions", {"messages": MSGS, **SAMPLE})
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == expected
    assert "".join(d.get("content", "") for d in deltas) == ""


def test_stop_strings_cut_and_stop(sdk, http):
    full = chat(sdk, max_tokens=24, **DIRECT).choices[0].message.content
    k = len(full) // 2
    stop = full[k: k + 3]
    k = full.find(stop)
    assert k > 0
    cut_reply = chat(sdk, max_tokens=24, stop=[stop, "never-there"], **DIRECT)
    cut, cut_usage = cut_reply.choices[0], cut_reply.usage.completion_tokens
    assert cut.message.content == full[:k].lstrip() and cut.finish_reason == "stop"
    chunks = stream_chunks(http, "/v1/chat/completions",
                           {"messages": MSGS, **SAMPLE, **DIRECT, "max_tokens": 24, "stop": stop})
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == full[:k].lstrip()
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    # usage counts the tokens up to the stop string's end (as OpenAI does), not those the task
    # made before it stopped: the same figure streamed and not (it varied with the pulses)
    streamed = stream_chunks(http, "/v1/chat/completions", {
        "messages": MSGS, **SAMPLE, **DIRECT, "max_tokens": 24, "stop": stop,
        "stream_options": {"include_usage": True}})[-1]["usage"]["completion_tokens"]
    again = chat(sdk, max_tokens=24, stop=[stop], **DIRECT).usage.completion_tokens
    assert cut_usage == streamed == again < chat(sdk, max_tokens=24, **DIRECT).usage.completion_tokens


def test_tools_are_described_and_answered(sdk, tiny_loader):
    from server.api.tools import parse_tools

    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                               "parameters": {"type": "object", "properties": {}}}}]
    r = chat(sdk, tools=tools, tool_choice="auto", **DIRECT)
    prompt = build_chat_prompt(MSGS, think=False, tools=parse_tools(tools))
    assert r.usage.prompt_tokens == len(tiny_loader.encode(prompt))
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert r.choices[0].message.role == "assistant"
    none = chat(sdk, tools=tools, tool_choice="none", **DIRECT)
    assert none.usage.prompt_tokens == len(tiny_loader.encode(build_chat_prompt(MSGS, think=False)))


# ---- /v1/completions (case 11) ---------------------------------------------------------------------
def complete(sdk, **kw):
    return sdk.completions.create(**{**SAMPLE, "max_tokens": 6, **kw})


def test_completions_prompt_forms_order_and_seeds(sdk, tiny_loader):
    ids = tiny_loader.encode("Once upon")
    one = [complete(sdk, prompt=p, seed=SAMPLE["seed"] + j).choices[0].text
           for p in ("Once upon", "The end") for j in range(2)]
    r = complete(sdk, prompt=["Once upon", "The end"], n=2)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert [c.index for c in r.choices] == [0, 1, 2, 3]  # index = i*n + j, in prompt order
    assert [c.text for c in r.choices] == one
    assert r.usage.prompt_tokens == len(ids) + len(tiny_loader.encode("The end"))
    assert complete(sdk, prompt=ids).choices[0].text == one[0]
    by_ids = complete(sdk, prompt=[ids, tiny_loader.encode("The end")])
    assert [c.text for c in by_ids.choices] == [one[0], one[2]]
    echo = complete(sdk, prompt="Once upon", echo=True).choices[0]
    assert echo.text == "Once upon" + one[0] and echo.logprobs is None


def test_completions_stream(http, sdk):
    full = complete(sdk, prompt=["Once upon", "The end"])
    chunks = stream_chunks(http, "/v1/completions", {**SAMPLE, "max_tokens": 6, "echo": True,
                                                     "prompt": ["Once upon", "The end"]})
    assert len({(c["id"], c["created"]) for c in chunks}) == 1
    texts, finish = {0: "", 1: ""}, {}
    for c in chunks:
        assert c["object"] == "text_completion" and "usage" not in c
        (ch,) = c["choices"]
        assert set(ch) == {"index", "text", "logprobs", "finish_reason"}
        texts[ch["index"]] += ch["text"]
        if ch["finish_reason"]:
            finish[ch["index"]] = ch["finish_reason"]
    assert texts == {0: "Once upon" + full.choices[0].text, 1: "The end" + full.choices[1].text}
    assert finish == {0: full.choices[0].finish_reason, 1: full.choices[1].finish_reason}
    usage = stream_chunks(http, "/v1/completions", {**SAMPLE, "prompt": "x",
                                                    "stream_options": {"include_usage": True}})
    assert usage[-1]["choices"] == [] and usage[-1]["usage"]["prompt_tokens"] == 1


def test_completions_stop(sdk):
    full = complete(sdk, prompt="Once upon", max_tokens=24).choices[0].text
    stop = full[len(full) // 2:][:3]
    cut = complete(sdk, prompt="Once upon", max_tokens=24, stop=stop).choices[0]
    assert cut.text == full[: full.find(stop)] and cut.finish_reason == "stop"


def test_completions_suffix_fills_in_the_middle(http, sdk, tiny_loader):
    """``suffix`` (code-completion clients send it): the prompt becomes the fill-in-the-middle
    prompt of ``/v1/tasks/fim``, so the completion is what the model writes between prompt and
    suffix; ``echo`` still gives the prompt as sent. It was ignored before (session 22)."""
    prefix, suffix = "def add(a, b):\n    ", "\n    return c\n"
    fim = fim_prompt(prefix, suffix)
    assert fim.startswith("✿prefix✿✿suffix✿" + suffix) and fim.endswith("✿middle✿" + prefix)
    want = complete(sdk, prompt=fim).choices[0].text
    r = complete(sdk, prompt=prefix, suffix=suffix)
    assert r.choices[0].text == want != complete(sdk, prompt=prefix).choices[0].text
    assert r.usage.prompt_tokens == len(tiny_loader.encode(fim))
    echo = complete(sdk, prompt=[prefix, prefix], suffix=suffix, echo=True)
    assert [c.text for c in echo.choices] == [prefix + want] * 2
    task = http.post("/v1/tasks/fim", json={"prefix": prefix, "suffix": suffix, "max_tokens": 6,
                                            "temperature": 1.0, "top_p": 1.0, "seed": 11})
    tid = task.json()["task_id"]
    deadline = time.monotonic() + 30
    while not (res := http.get(f"/v1/tasks/{tid}/get_result").json())["finished"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert res["result"] == want  # the Task API's fim: the same prompt
    # an empty suffix (an editor completing at a file's end) is fill-in-the-middle too, as on
    # /v1/tasks/fim (it was the plain prompt; session 41's QA)
    end = complete(sdk, prompt=prefix, suffix="")
    assert end.usage.prompt_tokens == len(tiny_loader.encode(fim_prompt(prefix, "")))
    assert end.choices[0].text == complete(sdk, prompt=fim_prompt(prefix, "")).choices[0].text
    assert_error(http.post("/v1/completions", json={"prompt": [1, 2], "suffix": "x",
                                                    "max_tokens": 2}), 400, param="suffix")
    # beside token ids an empty suffix is none (ids cannot be placed before one): as before
    plain = http.post("/v1/completions", json={"prompt": [1, 2], "suffix": "", "max_tokens": 2})
    assert plain.status_code == 200 and plain.json()["usage"]["prompt_tokens"] == 2


@pytest.mark.parametrize("value", [None, False])
def test_completions_take_logprobs_off_in_each_form(http, value):
    # the module's documented forms: false was a 400 ("a number is needed here, not a
    # boolean"; session 38's QA), while chat took it (0 asks for the tokens' own logprobs)
    r = http.post("/v1/completions", json={"prompt": "Once upon", "max_tokens": 2,
                                           "temperature": 0, "logprobs": value})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["logprobs"] is None


def test_completions_max_completion_tokens_wins(http):
    # API.md lists max_completion_tokens for the whole OpenAI API: completions ignored it
    r = http.post("/v1/completions", json={"prompt": "Once upon", "max_tokens": 20,
                                           "max_completion_tokens": 2, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 2
    assert r.json()["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("body,param", [
    ({"best_of": 2, "stream": True}, "best_of"),
    ({"best_of": 1, "n": 2}, "best_of"),
    ({"logprobs": 6}, "logprobs"),
    ({"logprobs": True}, "logprobs"),
    ({"prompt": []}, "prompt"),
    ({"prompt": [1, 70000]}, "prompt"),
    ({"prompt": ["a", 1]}, "prompt"),
    # booleans were read as numbers: true as max_tokens 1, [true, false] as ids [1, 0]
    ({"max_tokens": True}, "max_tokens"),
    ({"n": True}, "n"),
    ({"temperature": False}, "temperature"),
    ({"prompt": [True, False]}, "prompt"),
    ({"prompt": [[5, 6], [7, True]]}, "prompt"),
])
def test_completions_refusals(http, body, param):
    r = http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2, **body})
    assert_error(r, 400, param=param)


# ---- errors (cases 12-14) ---------------------------------------------------------------------------
@pytest.mark.parametrize("content,param", [
    (b"{not json", None),
    (b"[1, 2]", None),
    (json.dumps({"messages": MSGS, "temperature": "hot"}).encode(), "temperature"),
    (json.dumps({"messages": MSGS, "temperature": 2.5}).encode(), "temperature"),
    (json.dumps({"messages": MSGS, "n": 0}).encode(), "n"),
    # a reply of no tokens was a 200 without text; OpenAI refuses it (completions take 0)
    (json.dumps({"messages": MSGS, "max_tokens": 0}).encode(), "max_tokens"),
    (json.dumps({"messages": MSGS, "max_completion_tokens": 0}).encode(), "max_completion_tokens"),
    (json.dumps({"messages": MSGS, "stop": [1]}).encode(), "stop"),
    (json.dumps({"model": "rwkv-7"}).encode(), "messages"),
    (json.dumps({"messages": "hi"}).encode(), "messages"),
    (json.dumps({"messages": [{"role": "robot", "content": "x"}]}).encode(), "messages.0.role"),
    # values of the wrong JSON type were a 500 (TypeError/AttributeError), which the SDKs retry
    (json.dumps({"messages": [{"role": ["user"], "content": "x"}]}).encode(), "messages.0.role"),
    (json.dumps({"messages": [{"role": {"a": 1}, "content": "x"}]}).encode(), "messages.0.role"),
    (json.dumps({"messages": MSGS, "tools": [{"type": "function", "function": {"name": "f"}}],
                 "tool_choice": {"type": "function", "function": {"name": ["f"]}}}).encode(),
     "tool_choice"),
    (json.dumps({"messages": MSGS, "tools": [{"type": "function", "function": {"name": "f"}}],
                 "tool_choice": {"type": "function", "function": "f"}}).encode(), "tool_choice"),
    # an unknown tool_choice string was read as "auto" (session 23's QA)
    # without tools it went unchecked (session 23's review; an object naming a function is
    # still ignored there: test_client_extras_are_accepted); another JSON type is the schema's 400
    (json.dumps({"messages": MSGS, "tool_choice": "banana"}).encode(), "tool_choice"),
    (json.dumps({"messages": MSGS, "tool_choice": 5}).encode(), "tool_choice"),
    (json.dumps({"messages": MSGS, "tools": [{"type": "function", "function": {"name": "f"}}],
                 "tool_choice": "banana"}).encode(), "tool_choice"),
    # accepted before session 22: a text part without text (read as empty)
    (json.dumps({"messages": [{"role": "user", "content": [{"type": "text"}]}]}).encode(),
     "messages.0.content.0.text"),
    (json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]}
                ).encode(), "messages.0.content.0.text"),
    # brackets nested deeper than json.loads can recurse were a 500 (RecursionError)
    (b'{"messages": ' + b"[" * 100000 + b"]" * 100000 + b"}", None),
    (b'{"messages": [{"role": "user", "content": "x"}], "user": ' + b'{"a": ' * 5000 + b"1"
     + b"}" * 5000 + b"}", None),
])
def test_bad_requests_are_400_in_openai_shape(http, content, param):
    r = http.post("/v1/chat/completions", content=content,
                  headers={"Content-Type": "application/json"})
    assert_error(r, 400, param=param)
    assert http.get("/v1/models").status_code == 200  # still serving


def test_numbers_json_writes_oddly(http):
    """NaN and infinities (which Python's json reads) are refused as such; a float with no
    fraction is the integer it is, however large: ``max_tokens: 1e30`` was a 400 ("unable to
    parse input string") while the integer 10**30 is served as the cap (session 40's QA)."""
    for value in ("NaN", "Infinity", "-Infinity"):
        raw = b'{"messages": [{"role": "user", "content": "hi"}], "presence_penalty": ' + \
            value.encode() + b"}"
        r = http.post("/v1/chat/completions", content=raw,
                      headers={"Content-Type": "application/json"})
        assert_error(r, 400, param="presence_penalty")
        assert "finite number" in r.json()["error"]["message"]
    for big in (10 ** 30, 1e30):  # (a stream, left after its first line: the cap is long)
        body = json.dumps({"messages": MSGS, "max_tokens": big, "stream": True}).encode()
        with http.stream("POST", "/v1/chat/completions", content=body,
                         headers={"Content-Type": "application/json"}) as r:
            assert r.status_code == 200, r.read()
            assert next(r.iter_lines()).startswith("data: {")


def test_a_message_without_role_says_so(http):
    r = http.post("/v1/chat/completions", json={"messages": [{"content": "hi"}]})
    assert_error(r, 400, param="messages.0.role")
    assert "needs a 'role'" in r.json()["error"]["message"]


def test_prompt_too_long(sdk, http):
    long = [{"role": "user", "content": "word " * 131073}]  # RWKV_MAX_PROMPT_TOKENS: 131072
    with pytest.raises(openai.BadRequestError) as e:
        chat(sdk, messages=long)
    assert e.value.code == "context_length_exceeded"
    assert "This model's maximum context length is 131072 tokens (RWKV_MAX_PROMPT_TOKENS)" \
        in e.value.message  # (the setting named: session 42's QA)
    r = http.post("/v1/completions", json={"prompt": [11] * 131073})
    assert_error(r, 400, code="context_length_exceeded", param="prompt")


# ---- a client that leaves (case 16) -------------------------------------------------------------------
def wait_idle(http, seconds: float = 10.0) -> float:
    """Seconds until the server has no task in a slot or in the queue."""
    t0 = time.time()
    while (h := http.get("/health").json())["active"] or h["queue"]:
        assert time.time() - t0 < seconds, "generation went on after the client left"
        time.sleep(0.02)
    return time.time() - t0


def test_disconnect_stops_generation(server, http):
    body = {"messages": MSGS, **SAMPLE, "max_tokens": 20000, "stream": True}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")
            h = http.get("/health").json()
            assert h["active"] + h["queue"] == 1
    assert wait_idle(http) < 5  # 20000 tokens would take minutes
    # greedy: a seeded draw ended this random model's text by itself within the second (at token
    # 325, the "User" token after a newline or EOS) on one CPU and not on another (rounding
    # differences move the draws); an argmax flips only at near-ties
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/v1/completions",
                   json={**body, "prompt": "x", "stream": False, "temperature": 0}, timeout=1.0)
    assert wait_idle(http) < 5


def test_a_client_gone_mid_body_is_no_server_error(server, http):
    """A client that hangs up before its body ended (a Content-Length not met, a chunked body
    cut off): an OpenAI route logged "Unhandled error ... ClientDisconnect" with a traceback,
    and /metrics counted a 500 (route "other" for a chunked body: the body limit gave no reply
    at all); the Task API counted FastAPI's 400. Each is status 499 now (nginx's "client closed
    request"), without an error in the log."""
    from prometheus_client.parser import text_string_to_metric_families

    def counts():
        fams = {f.name: f for f in text_string_to_metric_families(http.get("/metrics").text)}
        out = {}
        for s in fams["rwkv_http_requests"].samples:
            if s.name.endswith("_total") and s.labels["method"] == "POST":
                key = (s.labels["route"], s.labels["status"])
                out[key] = out.get(key, 0) + s.value
        return out

    before, log_start = counts(), len(server.log())
    heads = ("Content-Length: 1000\r\n\r\n{\"messages\": [",
             "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n")
    paths = ("/v1/chat/completions", "/v1/completions", "/v1/tasks/tmp")
    for path in paths:
        for head in heads:
            with socket.create_connection(("127.0.0.1", server.port)) as s:
                s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                          f"\r\n{head}".encode())
                time.sleep(0.2)  # the server is reading the body when the client leaves
    deadline = time.time() + 5
    while sum(counts().values()) - sum(before.values()) < len(paths) * len(heads):
        assert time.time() < deadline, "a request was never counted"
        time.sleep(0.05)
    new = {k: v - before.get(k, 0) for k, v in counts().items() if v != before.get(k, 0)}
    assert set(new) <= {(p, "499") for p in paths} | {("other", "499")}, new
    assert "Unhandled error" not in server.log()[log_start:]
    # each has an access line, as /metrics counts it (none before: uvicorn logs replies only)
    def logged(path: str) -> int:
        return server.log()[log_start:].count(f'"POST {path} HTTP/1.1" 499')

    deadline = time.time() + 5  # (the log is read from the server's output as it comes)
    while any(logged(p) < len(heads) for p in paths) and time.time() < deadline:
        time.sleep(0.05)
    assert [logged(p) for p in paths] == [len(heads)] * len(paths)
    assert http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).status_code == 200


def test_a_path_with_a_newline_forges_no_log_line(server):
    """The 499 access line wrote the decoded path: ``/v1/tasks/x%0A<a fake line>/continue``
    with a body cut short put a forged line in the log (session 41's QA). It is quoted as
    uvicorn quotes its own lines."""
    log_start = len(server.log())
    path = "/v1/tasks/x%0A19:30:00.00%20|%20WARNING%20|%20FORGED/continue"
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Content-Length: 100\r\n\r\n{".encode())
        time.sleep(0.2)
    deadline = time.time() + 5
    while '" 499' not in server.log()[log_start:] and time.time() < deadline:
        time.sleep(0.05)
    log = server.log()[log_start:]
    (line,) = [line for line in log.splitlines() if '" 499' in line]
    assert '"POST /v1/tasks/x%0A19' in line and line.endswith('/continue HTTP/1.1" 499')
    assert not any(line.startswith("19:30:00.00") or "| FORGED" in line
                   for line in log.splitlines())


def test_best_of_equal_to_n_is_accepted(http):
    """``best_of`` >= ``n`` is served (LangChain's OpenAI LLM sends ``best_of: 1`` by default);
    only ``best_of`` < ``n`` is a 400 (session 43's mutation review)."""
    for extra in ({"best_of": 1}, {"best_of": 2, "n": 2}):
        r = http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2, **extra})
        assert r.status_code == 200, (extra, r.text)
        assert len(r.json()["choices"]) == extra.get("n", 1)
    r = http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2, "best_of": 1, "n": 2})
    assert r.status_code == 400 and r.json()["error"]["param"] == "best_of"


def test_each_choice_of_a_stream_starts_with_its_role(http):
    """Streamed ``n = 3``: every choice's first delta is the role (per-choice accumulators
    start from it; only choice 0 had it under a mutant)."""
    chunks = stream_chunks(http, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "n": 3, "max_tokens": 3,
        "temperature": 1.0, "seed": 1})
    first = {}
    for c in chunks:
        for ch in c["choices"]:
            first.setdefault(ch["index"], ch["delta"])
    assert sorted(first) == [0, 1, 2]
    assert all(d == {"role": "assistant", "content": ""} for d in first.values()), first


def test_the_openapi_document_describes_streams_and_errors(http):
    """Generating routes answer JSON or server-sent events, and errors in OpenAI's shape: the
    schema said a JSON string and no error (a fuzzing helper's schemathesis run, session 49)."""
    paths = http.get("/openapi.json").json()["paths"]
    for path in ("/v1/chat/completions", "/v1/completions"):
        replies = paths[path]["post"]["responses"]
        assert set(replies["200"]["content"]) == {"application/json", "text/event-stream"}
        for status in ("400", "401", "500", "503"):
            schema = replies[status]["content"]["application/json"]["schema"]
            assert set(schema["properties"]["error"]["required"]) == {
                "message", "type", "param", "code"}, (path, status)
    err = http.post("/v1/chat/completions", json={"messages": "x"}).json()["error"]
    assert set(err) == {"message", "type", "param", "code"}  # (what the document says)
    assert "404" in paths["/v1/models/{model_id}"]["get"]["responses"]
