"""Log probabilities over the OpenAI API (chat ``logprobs``/``top_logprobs``, completions
``logprobs``), against an in-process server on the tiny checkpoint, read by raw HTTP and by the
``openai`` SDK. Values are checked against the model (a prefill of each prefix), streams against
the non-stream reply of the same seeded request."""

import json
import threading

import pytest
import torch

from openai_helpers import http, sdk, server, stream_chunks  # noqa: F401 (fixtures)
from server.api.chat import build_chat_prompt
from test_api_openai import assert_error
from test_logprobs import reference_logprobs

PROMPT_IDS = [3, 1000, 2000, 33, 261]
MSGS = [{"role": "user", "content": "Tell me a story."}]
CHAT = dict(model="rwkv-7", messages=MSGS, reasoning_effort="none", max_tokens=8)


def completion(http, **kw) -> dict:
    r = http.post("/v1/completions", json={"prompt": PROMPT_IDS, "max_tokens": 6, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def token_ids(tiny_loader, entries) -> list[int]:
    """A chat reply's token ids, from each entry's exact bytes (the vocabulary maps bytes to
    ids one to one)."""
    ids = {b: i for i, b in enumerate(tiny_loader.tokenizer._bytes) if b}
    return [ids[bytes(e["bytes"])] for e in entries]


def test_sampled_chat_logprobs_are_the_models(http, tiny_loader):
    """Seeded sampling at a high temperature with penalties and top-k: each token's logprob
    and its 3 alternatives are the model's log-softmax after the prompt and the tokens
    before, not the sampler's tempered, penalised, truncated distribution."""
    r = http.post("/v1/chat/completions", json=dict(
        CHAT, logprobs=True, top_logprobs=3, temperature=1.8, top_k=9, top_p=0.95, seed=4,
        presence_penalty=1.5, frequency_penalty=0.5))
    assert r.status_code == 200, r.text
    entries = r.json()["choices"][0]["logprobs"]["content"]
    out = token_ids(tiny_loader, entries)
    prompt = tiny_loader.encode(build_chat_prompt(MSGS, think=False))
    ref = reference_logprobs(tiny_loader, prompt, out)
    for s, (tok, e) in enumerate(zip(out, entries)):
        assert e["logprob"] == pytest.approx(ref[s][tok].item(), abs=2e-3), s
        top = ref[s].topk(3)
        assert token_ids(tiny_loader, e["top_logprobs"]) == top.indices.tolist()
        assert [a["logprob"] for a in e["top_logprobs"]] == pytest.approx(
            top.values.tolist(), abs=2e-3)


def test_greedy_logprobs_match_the_reference_token_by_token(http, tiny_loader):
    """Greedy completion: each token is the model's most likely one (computed here step by
    step), its logprob the model's, and the most likely alternative that token again."""
    body = completion(http, logprobs=2, temperature=0, max_tokens=5)
    lp = body["choices"][0]["logprobs"]
    # the same greedy tokens from the model directly
    m, seq, ref = tiny_loader.model, list(PROMPT_IDS), []
    for _ in range(5):
        logits = m.prefill([seq], m.new_state(1))[0].double()
        tok = int(logits.argmax())
        ref.append((tok, logits.log_softmax(-1)))
        seq.append(tok)
    assert len(lp["token_logprobs"]) == 5
    for s, (tok, dist) in enumerate(ref):
        assert lp["tokens"][s] == tiny_loader.tokenizer.decode_bytes([tok]).decode(
            "utf-8", errors="replace")
        assert lp["token_logprobs"][s] == pytest.approx(dist[tok].item(), abs=2e-3)
        assert max(lp["top_logprobs"][s].values()) == pytest.approx(lp["token_logprobs"][s],
                                                                    abs=1e-6)


def test_chat_logprobs_shape_sdk_and_stream(http, sdk):
    """Chat: ``logprobs.content`` has an entry per counted token with ``top_logprobs``
    alternatives (bytes included), the SDK parses it, and the stream's chunks carry the same
    entries in order (usage counting them)."""
    req = dict(CHAT, temperature=1.0, top_p=1.0, seed=7, logprobs=True, top_logprobs=2)
    r = http.post("/v1/chat/completions", json=req)
    assert r.status_code == 200, r.text
    body = r.json()
    lp = body["choices"][0]["logprobs"]
    assert set(lp) == {"content", "refusal"} and lp["refusal"] is None
    entries = lp["content"]
    assert len(entries) == body["usage"]["completion_tokens"] > 0
    for e in entries:
        assert set(e) == {"token", "logprob", "bytes", "top_logprobs"}
        assert bytes(e["bytes"]).decode("utf-8", errors="replace") == e["token"]
        assert len(e["top_logprobs"]) == 2
        assert e["logprob"] <= e["top_logprobs"][0]["logprob"] + 1e-6
    text = b"".join(bytes(e["bytes"]) for e in entries).decode("utf-8", errors="replace")
    assert text.strip() == body["choices"][0]["message"]["content"].strip()

    parsed = sdk.chat.completions.create(**req)
    assert [c.logprob for c in parsed.choices[0].logprobs.content] == \
        [e["logprob"] for e in entries]
    assert parsed.choices[0].logprobs.content[0].top_logprobs[1].token == \
        entries[0]["top_logprobs"][1]["token"]

    chunks = stream_chunks(http, "/v1/chat/completions",
                           {**req, "stream_options": {"include_usage": True}})
    streamed = [e for c in chunks for ch in c["choices"] if ch.get("logprobs")
                for e in ch["logprobs"]["content"]]
    assert streamed == entries
    assert chunks[-1]["usage"]["completion_tokens"] == len(entries)
    assert chunks[0]["choices"][0]["logprobs"] is None  # the role chunk


def test_logprobs_stop_at_the_stop_string_and_per_choice(http):
    """A stop string: the entries are the tokens usage counts (through the stop string's
    end), streamed and not; ``n`` choices each get their own."""
    full = completion(http, logprobs=1, temperature=0, max_tokens=10)
    text = full["choices"][0]["text"]
    tokens = full["choices"][0]["logprobs"]["tokens"]
    # a token inside a pulse (the pulses ramp 1, 2, 4 steps: tokens 3-6 come in one), so
    # tokens after the stop string's end arrive with it (they are not counted)
    cut = next((t for k, t in enumerate(tokens[3:5], 3) if t.strip()
                and text.find(t) == len("".join(tokens[:k]))), None)
    if cut is None:
        pytest.skip("no usable stop string in this reply")
    stopped = completion(http, logprobs=1, temperature=0, max_tokens=10, stop=[cut])
    lp = stopped["choices"][0]["logprobs"]
    assert stopped["choices"][0]["finish_reason"] == "stop"
    n = stopped["usage"]["completion_tokens"]
    assert len(lp["tokens"]) == n < 10 and lp["tokens"] == tokens[:n]
    chunks = stream_chunks(http, "/v1/completions", {"prompt": PROMPT_IDS, "max_tokens": 10,
                                                     "logprobs": 1, "temperature": 0,
                                                     "stop": [cut]})
    streamed = [t for c in chunks for ch in c["choices"] if ch["logprobs"]
                for t in ch["logprobs"]["tokens"]]
    assert streamed == lp["tokens"]
    offsets = [o for c in chunks for ch in c["choices"] if ch["logprobs"]
               for o in ch["logprobs"]["text_offset"]]
    assert offsets == lp["text_offset"]

    two = completion(http, logprobs=0, temperature=1.0, top_p=1.0, seed=3, n=2)
    a, b = (c["logprobs"] for c in two["choices"])
    # no alternatives: each dict holds the sampled token alone (OpenAI's "logprobs + 1")
    assert a["top_logprobs"] == [{t: v} for t, v in zip(a["tokens"], a["token_logprobs"])]
    assert len(b["tokens"]) == two["choices"][1]["logprobs"]["text_offset"].__len__()
    assert sum(len(c["logprobs"]["tokens"]) for c in two["choices"]) == \
        two["usage"]["completion_tokens"]


@pytest.mark.parametrize("path,body,param", [
    ("/v1/chat/completions", dict(CHAT, top_logprobs=2), "top_logprobs"),
    ("/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=21), "top_logprobs"),
    ("/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=-1), "top_logprobs"),
    ("/v1/completions", {"prompt": "x", "logprobs": 6}, "logprobs"),
    ("/v1/completions", {"prompt": "x", "logprobs": True}, "logprobs"),
])
def test_logprob_refusals(http, path, body, param):
    assert_error(http.post(path, json=body), 400, param=param)


def test_no_logprobs_unless_asked(http):
    for body in ({}, {"logprobs": False}, {"logprobs": None}):
        r = completion(http, temperature=0, **body)
        assert r["choices"][0]["logprobs"] is None
    chunks = stream_chunks(http, "/v1/chat/completions", dict(CHAT, logprobs=False))
    assert all(ch["logprobs"] is None for c in chunks for ch in c["choices"])
    assert json.dumps(chunks)  # (plain JSON)


def test_completion_top_logprobs_hold_the_sampled_token(http):
    """Sampled at a high temperature, a token is often outside the 2 most likely: its dict then
    has 3 keys, the sampled one among them with its own logprob; greedy, it is the first of
    2."""
    body = completion(http, logprobs=2, temperature=2.0, top_k=0, top_p=1.0, seed=8,
                      max_tokens=12)
    lp = body["choices"][0]["logprobs"]
    sizes = set()
    for tok, value, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        assert top[tok] == value and len(top) in (2, 3)
        sizes.add(len(top))
    assert 3 in sizes  # (random weights: a flat distribution, the draws far from the top)
    greedy = completion(http, logprobs=2, temperature=0)["choices"][0]["logprobs"]
    assert all(len(top) == 2 and top[t] == v for t, v, top in
               zip(greedy["tokens"], greedy["token_logprobs"], greedy["top_logprobs"]))


def byte_token(tiny_loader, data: bytes) -> int:
    return tiny_loader.tokenizer._bytes.index(data)


def test_tokens_that_are_no_text_alone_stay_distinct_and_offsets_count_their_u_fffd(
        tiny_loader):
    """Two tokens each holding one lead byte of a character are written bytes:\\x.. (distinct
    keys, not two U+FFFD that collapse into one); a token after a lead byte its bytes do not
    complete starts after the U+FFFD that byte becomes; one that completes a character starts
    where the character does."""
    from server.api.logprob_format import CompletionLogprobs, token_text

    e4, e5 = byte_token(tiny_loader, b"\xe4"), byte_token(tiny_loader, b"\xe5")
    hello = tiny_loader.encode(" hello")[0]
    b8, ad = byte_token(tiny_loader, b"\xb8"), byte_token(tiny_loader, b"\xad")  # 中: e4 b8 ad
    assert token_text(tiny_loader.tokenizer, e4) == ("bytes:\\xe4", b"\xe4")
    pairs = [(e4, (-1.0, [e5, e4], [-1.0, -2.0])), (hello, (-0.5, [], [])),
             (e4, (-0.2, [], [])), (b8, (-0.1, [], [])), (ad, (-0.1, [], [])),
             (hello, (-0.3, [], []))]
    out = CompletionLogprobs(tiny_loader.tokenizer).shape(pairs)
    assert out["top_logprobs"][0] == {"bytes:\\xe5": -1.0, "bytes:\\xe4": -2.0}
    text = tiny_loader.tokenizer.decode([p[0] for p in pairs])
    assert text == "\ufffd hello中 hello"
    assert out["text_offset"] == [0, 1, 7, 7, 7, 8]
    assert [text[o:] for o in out["text_offset"]][1] == " hello中 hello"


def test_a_slow_reader_gets_each_pieces_own_log_probabilities(tiny_loader):
    """The pieces are produced while the reader is away: each still carries the log
    probabilities of the tokens of its own text (they were read when the reader came back)."""
    import asyncio

    from openai_helpers import ScriptedScheduler
    from server.api.completion import Choice, make_tasks, run_choices
    from server.api.splitter import OutputSplitter

    text = "One two three four five six seven eight nine ten"
    sched = ScriptedScheduler(tiny_loader, text, per_pulse=2, delay=0.01)
    (task,) = make_tasks([1, 2], 1, {"max_tokens": 100}, None, logprobs=0)
    choice = Choice(0, task, OutputSplitter("text"))
    sched.add_task(task)

    async def read():
        got = []
        async for _, piece in run_choices([choice], tiny_loader.tokenizer):
            if not got:
                await asyncio.sleep(0.5)  # the producer feeds every token meanwhile
            if piece is not None:
                got.append(piece)
        return got

    pieces = asyncio.run(read())
    assert len(pieces) > 3
    for piece in pieces:
        assert tiny_loader.tokenizer.decode([t for t, _ in piece.logprobs]) == piece.text
    assert choice.tail_logprobs == []


ECHO_TEXT = "The cat sat on the mat. 中文 ok"


def test_echo_with_logprobs_scores_the_prompt(http, tiny_loader):
    """``echo`` with ``logprobs`` and ``max_tokens: 0`` (how evaluation harnesses score a
    text): a logprob per prompt token after the ones before it (the first null), the model's
    own, with alternatives; tokens and offsets spell the echoed text."""
    body = completion(http, prompt=ECHO_TEXT, echo=True, logprobs=2, max_tokens=0,
                      temperature=0)
    choice = body["choices"][0]
    assert choice["text"] == ECHO_TEXT
    lp = choice["logprobs"]
    seq = tiny_loader.encode(ECHO_TEXT)
    assert len(lp["tokens"]) == len(seq) and "".join(lp["tokens"]) == ECHO_TEXT
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert lp["text_offset"][0] == 0
    assert [ECHO_TEXT[o:o + len(t)] for o, t in zip(lp["text_offset"], lp["tokens"])] == \
        lp["tokens"]
    m = tiny_loader.model
    for i in range(1, len(seq)):
        ref = torch.log_softmax(m.prefill([seq[:i]], m.new_state(1))[0].double(), -1)
        assert lp["token_logprobs"][i] == pytest.approx(ref[seq[i]].item(), abs=2e-3), i
        top = lp["top_logprobs"][i]
        assert top[lp["tokens"][i]] == lp["token_logprobs"][i] and len(top) in (2, 3)
        assert max(top.values()) == pytest.approx(ref.max().item(), abs=2e-3)


def test_echo_with_logprobs_then_the_reply_streamed_or_not(http):
    """With a reply too: the prompt's entries, then the reply's (as without echo, their
    offsets after the echoed text); streamed, the echo chunk carries the prompt's and the
    chunks together give the same lists."""
    plain = completion(http, prompt=ECHO_TEXT, logprobs=1, max_tokens=4, temperature=0)
    both = completion(http, prompt=ECHO_TEXT, echo=True, logprobs=1, max_tokens=4,
                      temperature=0)
    p, b = plain["choices"][0]["logprobs"], both["choices"][0]["logprobs"]
    n = len(b["tokens"]) - len(p["tokens"])
    assert b["tokens"][n:] == p["tokens"] and b["token_logprobs"][n:] == p["token_logprobs"]
    assert b["text_offset"][n:] == [len(ECHO_TEXT) + o for o in p["text_offset"]]
    assert both["choices"][0]["text"] == ECHO_TEXT + plain["choices"][0]["text"]
    chunks = stream_chunks(http, "/v1/completions", {"prompt": ECHO_TEXT, "echo": True,
                                                     "logprobs": 1, "max_tokens": 4,
                                                     "temperature": 0})
    first = chunks[0]["choices"][0]
    assert first["text"] == ECHO_TEXT and len(first["logprobs"]["tokens"]) == n
    joined = {k: [x for c in chunks for ch in c["choices"] if ch["logprobs"]
                  for x in ch["logprobs"][k]] for k in b}
    assert joined == b


def test_echo_scores_each_prompt_of_a_list(http, tiny_loader):
    """A list of prompts (how harnesses send a batch), with an empty one among them: each
    choice's entries are its own prompt's, in the prompts' order."""
    texts = [ECHO_TEXT, "", "A cat sat on the mat."]
    body = completion(http, prompt=texts, echo=True, logprobs=1, max_tokens=0)
    choices = sorted(body["choices"], key=lambda c: c["index"])
    assert [c["text"] for c in choices] == texts
    m = tiny_loader.model
    for text, choice in zip(texts, choices):
        seq, lp = tiny_loader.encode(text), choice["logprobs"]
        assert len(lp["tokens"]) == len(seq) and "".join(lp["tokens"]) == text
        for i in range(1, len(seq)):
            ref = torch.log_softmax(m.prefill([seq[:i]], m.new_state(1))[0].double(), -1)
            assert lp["token_logprobs"][i] == pytest.approx(ref[seq[i]].item(), abs=2e-3), i


def test_more_choices_than_ever_fit_are_refused_before_any_prompt_is_scored(
        http, server, monkeypatch):
    """Prompts × n past what the scheduler ever takes at once: 400 naming ``n`` at once (it
    was a 400 after every prompt had been scored; a 503 would be retried for ever)."""
    sched = server.runtime.scheduler
    calls = []
    monkeypatch.setattr(type(sched), "max_in_flight", property(lambda self: 2))
    monkeypatch.setattr(sched, "score", lambda *a, **k: calls.append(a))
    r = http.post("/v1/completions", json={"prompt": [ECHO_TEXT] * 3, "echo": True,
                                           "logprobs": 1, "max_tokens": 0})
    assert_error(r, 400, param="n")
    assert calls == []


def _queued_scores(monkeypatch, sched, refuse_at: int | None = None) -> list:
    """``sched.score`` queues nothing: it hands out pending futures (kept in the list
    returned), and refuses the ``refuse_at``-th call as a full queue would."""
    from concurrent.futures import Future

    from server.scheduler import QueueFull
    futures = []

    def score(tokens, top):
        if len(futures) == refuse_at:
            raise QueueFull("the scoring queue is full")
        futures.append(Future())
        return futures[-1]
    monkeypatch.setattr(sched, "score", score)
    return futures


def test_a_list_refused_part_way_leaves_none_of_its_prompts_queued(http, server, monkeypatch):
    """Three prompts, the queue full at the third: a 503, and the two queued before it are
    cancelled (the scheduler drops them), not scored for a request already answered."""
    futures = _queued_scores(monkeypatch, server.runtime.scheduler, refuse_at=2)
    r = http.post("/v1/completions", json={"prompt": [ECHO_TEXT] * 3, "echo": True,
                                           "logprobs": 1, "max_tokens": 0})
    assert_error(r, 503)
    assert len(futures) == 2 and all(f.cancelled() for f in futures)


def test_a_list_whose_first_prompt_fails_cancels_the_others(http, server, monkeypatch):
    """The first prompt's scoring fails: a 500 saying so, and the later prompts' jobs, still
    queued, are cancelled rather than scored for nobody."""
    futures = _queued_scores(monkeypatch, server.runtime.scheduler)
    fail = threading.Timer(0.2, lambda: futures[0].set_exception(RuntimeError("injected")))
    fail.start()
    r = http.post("/v1/completions", json={"prompt": [ECHO_TEXT] * 3, "echo": True,
                                           "logprobs": 1, "max_tokens": 0})
    fail.join()
    error = assert_error(r, 500, code="generation_error")
    assert "injected" in error["message"]
    assert len(futures) == 3 and not futures[0].cancelled()
    assert futures[1].cancelled() and futures[2].cancelled()


def test_echo_with_logprobs_refuses_a_template(http):
    made = http.post("/v1/tasks/create", json={"prompt": "System: be brief.\n\n",
                                                "max_tokens": 0}).json()
    tpl = http.post(f"/v1/tasks/{made['task_id']}/as_template").json()["task_id"]
    r = http.post("/v1/completions", json={"model": f"rwkv-7:{tpl}", "prompt": "Hi",
                                           "echo": True, "logprobs": 1, "max_tokens": 1})
    assert_error(r, 400, param="echo")
    ok = http.post("/v1/completions", json={"model": f"rwkv-7:{tpl}", "prompt": "Hi",
                                            "logprobs": 1, "max_tokens": 1})
    assert ok.status_code == 200 and ok.json()["choices"][0]["logprobs"]["token_logprobs"]


def test_echo_scores_one_token_prompts_and_a_last_pass_of_one_token(http, server):
    """A one-token prompt, and one a token longer than a whole number of passes (its last
    pass scores nothing), with alternatives: 200s (they were 500s: a last pass of one token
    returned no alternatives' ids)."""
    chunk = server.runtime.scheduler.prefill_chunk
    for prompt in ([3], [5 + i % 50 for i in range(chunk + 1)]):
        body = completion(http, prompt=prompt, echo=True, logprobs=2, max_tokens=0)
        lp = body["choices"][0]["logprobs"]
        assert len(lp["tokens"]) == len(prompt) and lp["token_logprobs"][0] is None
        assert all(v is not None for v in lp["token_logprobs"][1:])


def test_echo_with_logprobs_refuses_a_suffix(http):
    r = http.post("/v1/completions", json={"prompt": "def f(", "suffix": "\n", "echo": True,
                                           "logprobs": 1, "max_tokens": 2})
    assert_error(r, 400, param="suffix")


def test_a_shutdown_during_scoring_answers_503(tiny_model_path, tmp_path):
    """The server's shutdown (the drain) during a long prompt's scoring: 503
    server_shutting_down at once, the job cancelled (it was a 500 after uvicorn's graceful
    timeout)."""
    import time

    import httpx

    from openai_helpers import LiveServer
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu",
                        task_db_path=str(tmp_path / "t.db"), api_key=None, verbose=False,
                        max_prompt_tokens=100_000)
    with LiveServer(settings) as srv:
        got = {}

        def ask():
            got["r"] = httpx.post(srv.url + "/v1/completions", timeout=120, json={
                "prompt": [5 + i % 97 for i in range(60_000)], "echo": True, "logprobs": 1,
                "max_tokens": 0})

        t = threading.Thread(target=ask)
        t.start()
        sched = srv.runtime.scheduler
        deadline = time.time() + 60
        while not sched._scores and time.time() < deadline:
            time.sleep(0.01)
        job = sched._scores[0]
        start = time.time()
        srv.app.state.drain.begin()
        t.join(60)
        assert time.time() - start < 10
        assert_error(got["r"], 503, code="server_shutting_down")
        assert job.future.cancelled()


@pytest.mark.parametrize("outcome", ["scored", "failed", "crashed"])
def test_a_streamed_echo_with_logprobs_starts_before_its_prompt_is_scored(
        tiny_model_path, tmp_path, monkeypatch, outcome):
    """A streamed completion with ``echo`` and ``logprobs`` sent nothing, not even its status
    line or a keep-alive, until the whole prompt was scored (34 s for a 30,000-word prompt on
    a 2-core CPU: clients and proxies took it for a hung connection; session 71's QA). The
    stream now starts at once; a failure after that (the scoring's, or an unexpected one as
    the choices are made) is an error event, never a stream cut without a word."""
    import concurrent.futures

    import httpx

    from openai_helpers import LiveServer
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu",
                        task_db_path=str(tmp_path / "t.db"), api_key=None, verbose=False)
    gate = threading.Event()
    with LiveServer(settings) as srv:
        sched = srv.runtime.scheduler
        real = sched.score

        def held_score(tokens, top=0):  # the real scoring, handed on once the gate opens
            job, out = real(tokens, top), concurrent.futures.Future()

            def relay():
                gate.wait(60)
                if outcome == "failed":
                    out.set_exception(RuntimeError("boom"))
                else:
                    out.set_result(job.result())
            threading.Thread(target=relay, daemon=True).start()
            return out
        monkeypatch.setattr(sched, "score", held_score)
        if outcome == "crashed":
            from server.api.routes import openai as routes

            async def broken(*args):
                raise ValueError("unexpected")
            monkeypatch.setattr(routes, "prepare_tasks", broken)
        body = {"prompt": "Hello there, world", "echo": True, "logprobs": 1, "max_tokens": 2,
                "stream": True, "temperature": 0}
        try:
            with httpx.stream("POST", srv.url + "/v1/completions", json=body,
                              timeout=10) as r:
                assert r.status_code == 200 and not gate.is_set()  # (before the scoring)
                gate.set()
                events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        finally:
            gate.set()
    if outcome != "scored":
        assert len(events) == 1, events
        error = json.loads(events[0])["error"]
        assert error["message"] == ("Scoring the prompt failed: RuntimeError: boom"
                                    if outcome == "failed" else
                                    "Internal server error: ValueError"), error
        return
    assert events[-1] == "[DONE]"
    first = json.loads(events[0])["choices"][0]
    assert first["text"] == "Hello there, world"
    assert first["logprobs"]["tokens"][0] == "Hello"
    assert first["logprobs"]["token_logprobs"][0] is None
    assert json.loads(events[-2])["choices"][0]["finish_reason"] == "length"


def test_a_streamed_echo_with_logprobs_while_shutting_down_is_a_503(tiny_model_path, tmp_path):
    """A streamed completions request with ``echo`` and ``logprobs`` that arrives once the
    shutdown has begun is a 503 ``server_shutting_down`` with Retry-After, its prompt never
    queued for scoring: without ``_score_jobs``' drain check it was a 200 stream holding
    only the error event, its prompt scored for nobody (session 72's mutation review)."""
    from fastapi.testclient import TestClient

    from server.api.app import create_app
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"))
    with TestClient(create_app(settings)) as client:
        sched, calls = client.app.state.runtime.scheduler, []
        real = sched.score
        sched.score = lambda *a, **k: (calls.append(a), real(*a, **k))[1]
        client.app.state.drain.begin()
        r = client.post("/v1/completions", json={
            "prompt": "hello there", "echo": True, "logprobs": 1, "max_tokens": 2,
            "stream": True})
        assert_error(r, 503, code="server_shutting_down")
        assert r.headers.get("retry-after") and calls == []


def test_a_client_that_leaves_during_scoring_cancels_the_job(tiny_model_path, tmp_path):
    """A non-streamed completions request with ``echo`` and ``logprobs`` whose client gives up
    while its long prompt is scored: the scoring job is cancelled (dropped at its next pass),
    not scored to the end for nobody (``_scored`` watches the client; untested until session
    72's mutation review: the audit's 30,000-word prompt took 34 s of scoring)."""
    import time

    import httpx

    from openai_helpers import LiveServer
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu",
                        task_db_path=str(tmp_path / "t.db"), api_key=None, verbose=False,
                        max_prompt_tokens=100_000)
    with LiveServer(settings) as srv:
        sched = srv.runtime.scheduler

        def ask():  # (the client gives up: its read times out, the connection is closed)
            try:
                httpx.post(srv.url + "/v1/completions", timeout=httpx.Timeout(60, read=1.0),
                           json={"prompt": [5 + i % 97 for i in range(60_000)], "echo": True,
                                 "logprobs": 1, "max_tokens": 0})
            except httpx.TimeoutException:
                pass

        t = threading.Thread(target=ask)
        t.start()
        deadline = time.time() + 60
        while not sched._scores and time.time() < deadline:
            time.sleep(0.01)
        job = sched._scores[0]
        t.join(30)
        deadline = time.time() + 10
        while not job.future.cancelled() and time.time() < deadline:
            time.sleep(0.05)
        assert job.future.cancelled()
