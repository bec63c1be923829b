"""OpenAI API over HTTP with scripted model output: tool calls, reasoning, boundary, errors, busy.

Random weights never write a tool call, so here the server's scheduler is swapped for one that
"generates" a fixed text (tokenized with the real tokenizer, handed out a few tokens at a time from
another thread); everything else — routes, splitter, SSE — is the real server.
"""

import json

import openai
import pytest
from model_cases import force_successors
from openai_helpers import (LiveServer, http, script, sdk, server,  # noqa: F401 (fixtures)
                            stream_chunks)
from task_api_client import check_frames, parse_sse, text_of, wait_result

MSGS = [{"role": "user", "content": "Weather in Paris?"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def test_tool_call_non_stream(sdk, script):
    script(">" + CALL)
    r = sdk.chat.completions.create(model="rwkv-7", messages=MSGS, tools=TOOLS)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def test_only_calls_the_client_can_dispatch_are_tool_calls(sdk, script):
    """A call of a function the request did not offer, or another than the one its
    ``tool_choice`` forces, is answer text (a client such as LangChain's structured output
    parses tool_calls[0] against the forced schema); ``parallel_tool_calls: false`` ends the
    reply after its first call."""
    other = '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>'
    answer = {"type": "function", "function": {"name": "Answer", "parameters": {}}}
    script(">" + other)
    r = sdk.chat.completions.create(model="rwkv-7", messages=MSGS, tools=TOOLS)
    assert r.choices[0].finish_reason == "stop" and not r.choices[0].message.tool_calls
    assert r.choices[0].message.content == other
    script(">" + CALL)
    r = sdk.chat.completions.create(model="rwkv-7", messages=MSGS, tools=TOOLS + [answer],
                                    tool_choice={"type": "function",
                                                 "function": {"name": "Answer"}})
    assert not r.choices[0].message.tool_calls and r.choices[0].message.content == CALL
    script(">" + CALL + "\n" + CALL + "\nmore text")
    for parallel, n in ((None, 2), (False, 1)):
        kw = {} if parallel is None else {"parallel_tool_calls": parallel}
        r = sdk.chat.completions.create(model="rwkv-7", messages=MSGS, tools=TOOLS, **kw)
        assert len(r.choices[0].message.tool_calls) == n
        assert r.choices[0].finish_reason == "tool_calls"
        assert r.choices[0].message.content == (None if parallel is False else "more text")


def test_a_reply_cut_by_max_tokens_after_a_call_finishes_for_length(sdk, script, tiny_loader):
    """A complete call, then text that runs into ``max_tokens``: the reply was cut, so its
    finish_reason is "length" (an agent loop must not take it for a finished call); the call
    is still returned. Returning "tool_calls" there failed no test (session 41's mutation
    review)."""
    text = ">" + CALL + "\nAnd now a long explanation of the weather in Paris"
    script(text)
    n = len(tiny_loader.encode(">" + CALL)) + 3  # the call and a few tokens of the rest
    r = sdk.chat.completions.create(model="rwkv-7", messages=MSGS, tools=TOOLS, max_tokens=n)
    assert r.choices[0].finish_reason == "length"
    assert [c.function.name for c in r.choices[0].message.tool_calls] == ["get_weather"]
    assert r.usage.completion_tokens == n


def test_a_new_turn_inside_an_unclosed_tool_call_ends_the_reply(sdk, script):
    """The model opens a call, never closes it and starts a new turn; " \\n\\n" is one token
    (not the engine's turn newline), so the engine's own check does not end it: the splitter
    does, and the made-up turn never reaches the client (session 53's review: it ran to
    max_tokens and came back as content)."""
    fake = script('>Let me check. <tool_call>{"name": "get_weather", "arguments": '
                  '{"city": "Paris" \n\nUser: thanks! And Rome?\n\nAssistant: Sure'
                  + " more" * 200, per_pulse=1)
    r = sdk.chat.completions.create(model="rwkv-7", messages=MSGS, tools=TOOLS, max_tokens=300)
    content = r.choices[0].message.content or ""
    assert "User:" not in content, content
    assert fake.tasks[0].stop_requested  # the boundary stopped generation
    assert r.choices[0].finish_reason == "stop"


def test_tool_call_arguments_not_an_object_are_text(sdk, script):
    """A block whose arguments are a list is no tool call (OpenAI's arguments are an object):
    it comes back as the answer's text."""
    script('>' + '<tool_call>{"name": "get_weather", "arguments": ["Paris"]}</tool_call>')
    r = sdk.chat.completions.create(model="rwkv-7", messages=MSGS, tools=TOOLS)
    assert not r.choices[0].message.tool_calls
    assert '"arguments": ["Paris"]' in r.choices[0].message.content


def test_tool_call_stream_deltas(http, sdk, script):
    script(">Checking.\n" + CALL + "\n" + CALL.replace("Paris", "Rome"), per_pulse=1)
    chunks = stream_chunks(http, "/v1/chat/completions",
                           {"model": "rwkv-7", "messages": MSGS, "tools": TOOLS})
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("content") or "" for d in deltas).strip() == "Checking."
    calls = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert all("index" in tc and "function" in tc for tc in calls)
    firsts = [tc for tc in calls if "id" in tc]
    assert [(tc["index"], tc["type"], tc["function"]) for tc in firsts] == [
        (0, "function", {"name": "get_weather", "arguments": ""}),
        (1, "function", {"name": "get_weather", "arguments": ""})]
    assert len({tc["id"] for tc in firsts}) == 2
    later = [tc for tc in calls if "id" not in tc]
    assert all(set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"}
               for tc in later)
    args = {i: "".join(tc["function"]["arguments"] for tc in calls if tc["index"] == i)
            for i in (0, 1)}
    assert {i: json.loads(a) for i, a in args.items()} == {0: {"city": "Paris"}, 1: {"city": "Rome"}}
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None,
                                        "finish_reason": "tool_calls"}
    stream = sdk.chat.completions.create(model="rwkv-7", messages=MSGS, tools=TOOLS, stream=True)
    assert sum(len(c.choices[0].delta.tool_calls or []) for c in stream) == len(calls)


def test_tool_follow_up_is_accepted(sdk, script):
    script(">It is 18C and sunny in Paris.")
    history = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"}]
    r = sdk.chat.completions.create(model="rwkv-7", messages=history, tools=TOOLS)
    assert r.choices[0].message.content == "It is 18C and sunny in Paris."
    assert r.choices[0].finish_reason == "stop" and not r.choices[0].message.tool_calls


def test_reasoning_and_turn_boundary(http, sdk, script):
    # (text after the boundary for ~0.4 s: with only a few tokens the fake finished before the
    # loop, busy on a loaded 2-core machine, read the boundary and asked it to stop)
    fake = script(">The user greets me.</think>\nHello! How can I help?\n\nUser: and more"
                  + " more" * 200, per_pulse=1)
    r = sdk.chat.completions.create(model="rwkv-7", messages=MSGS, reasoning_effort="high")
    msg = r.choices[0].message
    assert msg.reasoning_content == "The user greets me."
    assert msg.content == "Hello! How can I help?" and r.choices[0].finish_reason == "stop"
    assert fake.tasks[0].stop_requested  # the boundary stopped generation
    chunks = stream_chunks(http, "/v1/chat/completions",
                           {"model": "rwkv-7", "messages": MSGS, "reasoning_effort": "medium"})
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "The user greets me."
    assert "".join(d.get("content", "") for d in deltas) == "Hello! How can I help?"
    assert all("<" not in d.get("content", "") and "User" not in d.get("content", "")
               for d in deltas)


def test_inline_think_setting(http, server, script, monkeypatch):
    settings = server.runtime.settings.model_copy(update={"chat_inline_think": True})
    monkeypatch.setattr(server.runtime, "settings", settings)
    script(">Short thought.</think>\nAnswer.", per_pulse=1)
    chunks = stream_chunks(http, "/v1/chat/completions",
                           {"model": "rwkv-7", "messages": MSGS, "reasoning_effort": "high"})
    contents = [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]]
    assert contents[0] == "<think>"  # one whole delta
    assert "".join(contents) == "<think>Short thought.</think>Answer."


def test_error_after_stream_started(http, sdk, script):
    script(">Some text that", reason="error", error="RuntimeError: device lost")
    with http.stream("POST", "/v1/chat/completions",
                     json={"messages": MSGS, "stream": True}) as r:
        assert r.status_code == 200
        raw = r.read().decode()
    events = [e.removeprefix("data: ") for e in raw.split("\n\n") if e]
    assert "[DONE]" not in events
    last = json.loads(events[-1])
    assert set(last) == {"error"} and "device lost" in last["error"]["message"]
    with pytest.raises(openai.APIError):
        list(sdk.chat.completions.create(model="rwkv-7", messages=MSGS, stream=True))
    r = http.post("/v1/completions", json={"prompt": "x"})
    assert r.status_code == 500 and "device lost" in r.json()["error"]["message"]
    # not retried: each of the SDK's two retries would be a whole generation again
    assert r.headers["x-should-retry"] == "false"
    fake = script(">Some text", reason="error", error="RuntimeError: device lost")
    with pytest.raises(openai.InternalServerError):
        sdk.chat.completions.create(model="rwkv-7", messages=MSGS)  # default max_retries
    assert len(fake.tasks) == 1  # was 3


def test_busy_is_503_with_retry_after(http, sdk, script):
    script("x", capacity=0)
    r = http.post("/v1/chat/completions", json={"messages": MSGS})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    with pytest.raises(openai.InternalServerError):
        sdk.completions.create(model="rwkv-7", prompt="x")
    fake = script("x", capacity=1, delay=0.5)  # room for the first of n=3 only
    assert http.post("/v1/chat/completions", json={"messages": MSGS, "n": 3}).status_code == 503
    assert fake.tasks == []  # none queued (the room for all three is checked first)


def test_keep_alives_are_comments(http, sdk, script, monkeypatch):
    import server.api.routes.openai as routes

    monkeypatch.setattr(routes, "PING_SECONDS", 0.05)
    script(">slow answer", per_pulse=1, delay=0.15)
    with http.stream("POST", "/v1/chat/completions",
                     json={"messages": MSGS, "stream": True}) as r:
        raw = r.read().decode()
    assert "\n: ping\n\n" in raw or raw.startswith(": ping\n\n")
    assert all(line.startswith(("data: ", ": ping")) for line in raw.split("\n") if line)
    stream = sdk.chat.completions.create(model="rwkv-7", messages=MSGS, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "slow answer"


def test_parameters_reach_the_tasks(http, server, script):
    fake = script(">ok")
    r = http.post("/v1/chat/completions", json={
        "messages": MSGS, "n": 2, "seed": 9, "temperature": 0.5, "top_p": 0.8, "top_k": 7,
        "presence_penalty": 0.5, "frequency_penalty": 0.25, "penalty_decay": 0.9,
        "max_tokens": 10 ** 6})
    assert r.status_code == 200, r.text
    s = server.runtime.settings
    for j, task in enumerate(fake.tasks):
        assert task.task_id.startswith("TMP_") and task.keep_state is False
        assert task.seed == 9 + j and task.max_tokens == s.max_tokens_cap
        assert (task.temperature, task.top_p, task.top_k) == (0.5, 0.8, 7)
        # OpenAI: p·[count>0] + f·count  ==  RWKV: first time p + f, each later time f
        assert (task.presence_penalty, task.repetition_penalty) == (0.75, 0.25)
        assert task.penalty_decay == 0.9
    fake = script(">ok")
    http.post("/v1/completions", json={"prompt": "x", "frequency_penalty": -1})
    (task,) = fake.tasks
    assert task.max_tokens == s.default_max_tokens and task.temperature == s.default_temperature
    assert (task.presence_penalty, task.repetition_penalty) == (s.default_presence_penalty, 0.0)
    assert (task.top_p, task.top_k) == (s.default_top_p, s.default_top_k)


@pytest.mark.parametrize("presence, repetition", [(2.0, 0.5), (0.0, 1.0), (3.0, 0.0)])
def test_default_penalties_are_the_task_apis_sampler(presence, repetition):
    """RWKV_DEFAULT_PRESENCE_PENALTY / _REPETITION_PENALTY are the RWKV sampler's values (the
    Task API's defaults): a chat naming neither penalty gets that sampler. They were taken as
    OpenAI's p and f, so presence came out as their sum (2.5 for 2 and 0.5; session 54)."""
    from types import SimpleNamespace

    from server.api.routes.openai import sampling_params
    from server.config import Settings

    s = Settings(default_presence_penalty=presence, default_repetition_penalty=repetition)
    fields = ("max_completion_tokens", "max_tokens", "temperature", "top_p", "top_k", "min_p",
              "penalty_decay", "presence_penalty", "frequency_penalty")
    req = SimpleNamespace(**dict.fromkeys(fields))
    got = sampling_params(req, s)
    assert (got["presence_penalty"], got["repetition_penalty"]) == (presence, repetition)
    # one named: the other keeps its default in OpenAI's terms (p = P - R, f = R)
    req.frequency_penalty = 0.25
    got = sampling_params(req, s)
    assert got["presence_penalty"] == max(presence - repetition + 0.25, 0)
    assert got["repetition_penalty"] == 0.25


def test_utf8_never_split(http, script):
    text = "你好，世界 🌍🎉 naïve — ½"
    script(">" + text, per_pulse=1)
    chunks = stream_chunks(http, "/v1/chat/completions", {"messages": MSGS})
    deltas = [c["choices"][0]["delta"].get("content", "") for c in chunks]
    assert "".join(deltas) == text and not any("\ufffd" in d for d in deltas)
    assert len([d for d in deltas if d]) > 5  # really streamed piece by piece


def test_line_separators_stay_inside_their_event(http, script):
    """U+2028, U+2029 and U+0085 are valid raw in JSON and SSE does not split on them, but
    str.splitlines (httpx's iter_lines) does: each chunk's JSON must stay one line for it."""
    text = "line one\u2028line two\u2029three\x85four"
    script(">" + text, per_pulse=1)
    with http.stream("POST", "/v1/chat/completions",
                     json={"messages": MSGS, "stream": True}) as r:
        lines = [ln for ln in r.iter_lines() if ln]
    assert lines[-1] == "data: [DONE]" and all(ln.startswith("data: ") for ln in lines)
    deltas = [json.loads(ln[6:])["choices"][0]["delta"] for ln in lines[:-1]]
    assert "".join(d.get("content") or "" for d in deltas) == text


def test_api_key_when_configured(server, tmp_path):
    settings = server.runtime.settings.model_copy(update={
        "api_key": "s3cret", "task_db_path": str(tmp_path / "k.db")})
    with LiveServer(settings) as keyed:
        bad = openai.OpenAI(base_url=keyed.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as e:
            bad.models.list()
        assert e.value.status_code == 401 and e.value.type == "authentication_error"
        good = openai.OpenAI(base_url=keyed.url + "/v1", api_key="s3cret", max_retries=0)
        assert [m.id for m in good.models.list()][-1] == "rwkv-7"


def test_completion_keeps_leading_whitespace(http, sdk, script):
    # /v1/completions returns the continuation as generated: the prompt plus the text must be
    # the document (code indentation, the space before the next word); only chat trims it
    text = "\n    return x  # done"
    script(text, per_pulse=1)
    r = sdk.completions.create(model="rwkv-7", prompt="def f(x):")
    assert r.choices[0].text == text
    echo = sdk.completions.create(model="rwkv-7", prompt="def f(x):", echo=True)
    assert echo.choices[0].text == "def f(x):" + text
    chunks = stream_chunks(http, "/v1/completions", {"model": "rwkv-7", "prompt": "def f(x):"})
    assert "".join(c["choices"][0]["text"] for c in chunks) == text
    script(">  Hi.")  # chat: the answer still starts at its first word
    assert sdk.chat.completions.create(model="rwkv-7", messages=MSGS).choices[0].message.content \
        == "Hi."


# (a request cut short by the shutdown: test_shutdown_cut.py)


def test_a_big_body_is_parsed_and_rendered_off_the_event_loop(http, monkeypatch):
    """A body past ``OFF_LOOP_BYTES`` is parsed and its chat prompt built in a worker thread,
    a small one on the event loop (its time to first token: no thread hops). Inline, a 7.8 MB
    body of 230,000 messages held the loop ~1.4 s: every stream waited (session 25's QA)."""
    import threading

    from server.api.routes import openai as routes
    from server.api.routes import openai_schemas

    seen = {}

    def spy(name, fn):
        def wrapped(*a, **k):
            seen.setdefault(name, []).append(threading.get_ident())
            return fn(*a, **k)
        return wrapped

    monkeypatch.setattr(openai_schemas, "_parse", spy("parse", openai_schemas._parse))
    monkeypatch.setattr(routes, "build_chat_prompt", spy("build", routes.build_chat_prompt))
    small = [{"role": "user", "content": "hi"}]
    big = [{"role": "user", "content": "word " * 20}] * 4000  # ~0.45 MB
    for messages in (small, small, big):
        r = http.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 1})
        assert r.status_code in (200, 400), r.text
    loop = seen["parse"][0]
    assert seen["parse"][:2] == seen["build"][:2] == [loop, loop]  # small: inline
    assert seen["parse"][2] != loop and seen["build"][2] != loop  # big: a worker thread


def test_an_echoed_prompt_of_token_ids_and_its_reply_are_one_document(http, script, tiny_loader):
    """A prompt of token ids ending inside a character (A, then 中's first two bytes) that the
    reply completes (its last byte, then B): with ``echo`` the text is the document's, "A中B",
    streamed or not; it came back as "A\\ufffd\\ufffdB" (the prompt and the reply decoded
    apart; session 42's QA). Without echo the reply is its own tokens' text, as before."""
    tok = tiny_loader.tokenizer
    byte = {tok.token_bytes(i): i for i in range(1, 300) if len(tok.token_bytes(i)) == 1}
    zh = "中".encode()
    prompt = tok.encode("A") + [byte[zh[:1]], byte[zh[1:2]]]
    script("x", per_pulse=1).tokens = [byte[zh[2:]]] + tok.encode("B")
    body = {"model": "rwkv-7", "prompt": prompt, "echo": True, "max_tokens": 10}
    r = http.post("/v1/completions", json=body).json()
    assert r["choices"][0]["text"] == "A中B" and r["usage"]["completion_tokens"] == 2
    chunks = stream_chunks(http, "/v1/completions", body)
    assert "".join(c["choices"][0]["text"] for c in chunks) == "A中B"
    assert http.post("/v1/completions", json={**body, "echo": False}).json()[
        "choices"][0]["text"] == "\ufffdB"
    script("x", per_pulse=1).tokens = tok.encode("B")  # never completed: U+FFFD, once
    assert http.post("/v1/completions", json=body).json()["choices"][0]["text"] == "A\ufffdB"


def test_a_task_api_round_goes_on_from_a_character_the_last_one_began(http, server, script,
                                                                      tiny_loader, monkeypatch):
    """The Task API's rounds are pieces of one document: a round that ended inside a character
    (A, then 中's first two bytes) shows it as U+FFFD, and a ``continue`` completing it (its
    last byte, then B) starts with 中 — it started with U+FFFD too (each round decoded apart;
    session 42's QA). So does a round after a token-id prompt ending inside a character, and a
    stream read from inside one, also one asking for a ``pos`` not generated yet. A round that
    does not complete it shows no second U+FFFD, and a round of no tokens is "" (a review of
    the first fix: "\ufffd" for ``max_tokens: 0``, "A\ufffd" then "\ufffdB")."""
    tok = tiny_loader.tokenizer
    byte = {tok.token_bytes(i): i for i in range(1, 300) if len(tok.token_bytes(i)) == 1}
    zh = "中".encode()
    A, B, X = tok.encode("A"), tok.encode("B"), tok.encode("X")
    head = A + [byte[zh[:1]], byte[zh[1:2]]]  # A and 中's first two bytes
    fake = script("x", per_pulse=1)
    monkeypatch.setattr(server.app.state.task_service, "scheduler", fake)

    def run(path, body, tokens):
        fake.tokens = tokens
        r = http.post(path, json=body)
        assert r.status_code == 200, r.text
        return r.json()["task_id"]

    def result(tid):
        return wait_result(http, tid)["result"]

    def streamed(tid, pos=0):
        r = http.get(f"/v1/tasks/{tid}/stream", params={"pos": pos})
        return text_of(check_frames(parse_sse(r.text)))

    tid = run("/v1/tasks/create", {"prompt": "Q", "max_tokens": 3}, head + X)
    assert result(tid) == "A\ufffd"
    run(f"/v1/tasks/{tid}/continue", {"max_tokens": 2}, [byte[zh[2:]]] + B)
    assert result(tid) == "中B"
    assert streamed(tid) == "中B" and streamed(tid, 1) == "B"  # (the round over: all, [DONE])
    tid = run("/v1/tasks/create", {"prompt": "Q", "max_tokens": 3}, head + X)
    assert result(tid) == "A\ufffd"
    run(f"/v1/tasks/{tid}/continue", {"max_tokens": 1}, B)  # never completed: no second U+FFFD
    assert result(tid) == "B" and streamed(tid) == "B"
    tid = run("/v1/tasks/create", {"prompt": head, "max_tokens": 2}, [byte[zh[2:]]] + B)
    assert result(tid) == "中B"  # a token-id prompt's character, completed
    tid = run("/v1/tasks/create", {"prompt": head, "max_tokens": 1}, B + X)
    assert result(tid) == "B"
    tid = run("/v1/tasks/create", {"prompt": head, "max_tokens": 0}, [])
    assert result(tid) == "" and streamed(tid) == ""  # a round of no tokens
    fake.delay = 0.3  # a reader asking for a position not generated yet
    tid = run("/v1/tasks/create", {"prompt": "Q", "max_tokens": 5}, head + [byte[zh[2:]]] + B)
    assert streamed(tid, 3) == "中B" and result(tid) == "A中B"


@pytest.mark.parametrize("text", [">Hello there.\n\n", ">" + CALL, ">Hi\n\nUser: more"])
def test_logprobs_cover_every_counted_token_streamed_or_not(http, script, text):
    """Log probabilities go with the tokens usage counts, whatever text the reply shows: a
    chat answer's trailing newlines (dropped at its end), a tool call (no content), the turn
    boundary (the text after it never sent). Streamed, each entry comes once and in order;
    a token whose text is held comes with a later chunk, at the latest the last."""
    from openai_helpers import scripted_logprob

    script(text, per_pulse=3)
    body = {"model": "rwkv-7", "messages": MSGS, "tools": TOOLS, "logprobs": True,
            "top_logprobs": 2}
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    n = r.json()["usage"]["completion_tokens"]
    entries = r.json()["choices"][0]["logprobs"]["content"]
    assert [e["logprob"] for e in entries] == [scripted_logprob(i, 2)[0] for i in range(n)]
    assert all(len(e["top_logprobs"]) == 2 for e in entries)
    chunks = stream_chunks(http, "/v1/chat/completions",
                           {**body, "stream_options": {"include_usage": True}})
    streamed = [e for c in chunks for ch in c["choices"] if ch["logprobs"]
                for e in ch["logprobs"]["content"]]
    assert streamed == entries and chunks[-1]["usage"]["completion_tokens"] == n


@pytest.mark.parametrize("end,text", [(24281, " Done."), (0, " Done.\n\n")])
def test_a_completion_the_engines_turn_check_ended_drops_the_turns_blank_line(
        http, server, tiny_loader, monkeypatch, end, text):
    """The model writes " Done.", a blank line (token 261), then "User": the engine's new-turn
    check ends the reply there, so the blank line is the turn's, cut as the splitter cuts it
    when the boundary "\\n\\nUser:" ends the reply (it came back as " Done.\\n\\n", both
    finishing "stop"; session 54's note). After end-of-text (token 0) the blank line is the
    document's and stays. Streamed or not; usage counts the blank line's token either way."""
    prompt = tiny_loader.encode("Q: done?\nA:")
    done = tiny_loader.encode(" Done.\n\n")
    assert done[-1] == 261
    chain = [prompt[-1]] + done + [end]
    force_successors(server.runtime.loader.model, monkeypatch, dict(zip(chain, chain[1:])))
    body = {"model": "rwkv-7", "prompt": "Q: done?\nA:", "max_tokens": 20, "temperature": 0}
    r = http.post("/v1/completions", json=body).json()
    assert r["choices"][0]["text"] == text and r["choices"][0]["finish_reason"] == "stop"
    assert r["usage"]["completion_tokens"] == len(done)
    chunks = stream_chunks(http, "/v1/completions",
                           {**body, "stream_options": {"include_usage": True}})
    assert "".join(ch["text"] for c in chunks for ch in c["choices"]) == text
    assert chunks[-1]["usage"]["completion_tokens"] == len(done)
