"""Log probabilities over the OpenAI API (chat ``logprobs``/``top_logprobs``, completions
``logprobs``), against an in-process server on the tiny checkpoint, read by raw HTTP and by the
``openai`` SDK. Values are checked against the model (a prefill of each prefix), streams against
the non-stream reply of the same seeded request."""

import json

import pytest

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
    assert a["top_logprobs"] == [{}] * len(a["tokens"]) and a["token_logprobs"]
    assert len(b["tokens"]) == two["choices"][1]["logprobs"]["text_offset"].__len__()
    assert sum(len(c["logprobs"]["tokens"]) for c in two["choices"]) == \
        two["usage"]["completion_tokens"]


@pytest.mark.parametrize("path,body,param", [
    ("/v1/chat/completions", dict(CHAT, top_logprobs=2), "top_logprobs"),
    ("/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=21), "top_logprobs"),
    ("/v1/chat/completions", dict(CHAT, logprobs=True, top_logprobs=-1), "top_logprobs"),
    ("/v1/completions", {"prompt": "x", "logprobs": 6}, "logprobs"),
    ("/v1/completions", {"prompt": "x", "logprobs": True}, "logprobs"),
    ("/v1/completions", {"prompt": "x", "logprobs": 2, "echo": True}, "echo"),
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
