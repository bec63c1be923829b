"""OpenAI's ``logit_bias`` (Task.logit_bias; server/scheduler/logit_bias.py), on the CPU: each
token a biased row draws is drawn from the model's logits plus its bias (checked against a fresh
prefill of the sequence so far), the bias stays with its task when slots move, no other row
sees it, the log probabilities stay the model's own, and bad biases are refused (SDK and HTTP).
"""

import pytest
import torch

from openai_helpers import http, server  # noqa: F401 (fixtures)
from server.scheduler import DynamicScheduler
from server.task.task import Task
from test_api_openai import assert_refused_on_both
from test_logprobs import check_entries

PROMPT_IDS = [3, 1000, 2000, 33, 261]


def prefill_logits(loader, tokens: list[int]) -> torch.Tensor:
    m = loader.model
    return m.prefill([tokens], m.new_state(1))[0].double()


def biased_argmax(loader, tokens: list[int], bias: dict[int, float]) -> int:
    """The greedy token after ``tokens`` under ``bias``, checked to be no near-tie."""
    x = prefill_logits(loader, tokens)
    for t, b in bias.items():
        x[t] += b
    top = torch.topk(x, 2)
    assert top.values[0] - top.values[1] > 1e-3, "a near-tie: pick another case"
    return int(top.indices[0])


def greedy(sched, prompt, max_tokens, bias=None, **kw):
    task = sched.new_task(list(prompt), max_tokens=max_tokens, temperature=0.0, **kw)
    task.logit_bias = bias
    return task


def test_greedy_tokens_are_the_argmax_of_the_biased_logits(tiny_loader):
    """A ban (-100) on the unbiased reply's first token and a lift (+3) of another: every
    token is the argmax of the model's logits plus the bias, and the reply changed."""
    prompt = tiny_loader.encode("User: name a colour\n\nAssistant:")
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=3)
    plain = greedy(sched, prompt, 6)
    sched.run()
    x = prefill_logits(tiny_loader, prompt)
    bias = {plain.output[0]: -100.0, int(torch.topk(x, 5).indices[4]): 3.0}
    task = greedy(sched, prompt, 6, bias)
    sched.run()
    assert task.output != plain.output
    for s, tok in enumerate(task.output):
        assert tok == biased_argmax(tiny_loader, prompt + task.output[:s], bias), s


def test_a_lifted_token_is_drawn_at_every_step_in_a_changing_batch(tiny_loader):
    """+100 on one token, sampled at temperature 1 with top-k off and penalties: every token
    is that one; the row sits last and moves to slot 0 when the others end (the capacity
    shrinks); its greedy neighbours' replies are those they give alone."""
    prompts = [tiny_loader.encode(f"User: q{i}\n\nAssistant:") for i in range(4)]
    alone = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=2)
    solo = [greedy(alone, p, 3 + i) for i, p in enumerate(prompts[:3])]
    alone.run()
    sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=2)
    others = [greedy(sched, p, 3 + i) for i, p in enumerate(prompts[:3])]
    lifted = sched.new_task(list(prompts[3]), max_tokens=12, temperature=1.0, top_k=0,
                            top_p=1.0, presence_penalty=1.0, repetition_penalty=0.5,
                            penalty_decay=0.99, seed=3)
    lifted.logit_bias = {4000: 100.0}
    sched.run()
    assert lifted.output == [4000] * 12
    assert [t.output for t in others] == [t.output for t in solo]
    assert min(p["cap"] for p in sched.pulses) < max(p["cap"] for p in sched.pulses)


def test_log_probabilities_stay_the_models_own(tiny_loader):
    """A biased row's logprobs are the log-softmax of the model's logits, not of the biased
    ones (the banned token keeps its probability among the alternatives)."""
    prompt = tiny_loader.encode("User: hi\n\nAssistant:")
    sched = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=4)
    top = int(torch.argmax(prefill_logits(tiny_loader, prompt)))
    task = greedy(sched, prompt, 4, {top: -100.0})
    task.logprobs = 3
    sched.run()
    assert task.output[0] != top
    assert task.output_logprobs[0][1][0] == top  # still the most likely, as the model says
    check_entries(tiny_loader, task, prompt, 3)


def test_a_bias_is_its_rounds_a_continue_samples_as_a_fork_does(tiny_loader):
    """``logit_bias`` is the round's (new_task: "the first round's"; the Task API sets it again
    for each round; not stored): ``continue_gen`` kept a finished round's, so the next round of
    an SDK task drew the lifted token still, unlike a fork of it continued alike (a fork copies
    none) or the same task read back from the database (none stored)."""
    prompt = tiny_loader.encode("User: q\n\nAssistant:")
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=3)
    task = greedy(sched, prompt, 3, {4000: 100.0})
    sched.run()
    assert task.output == [4000] * 3
    fork = task.fork("F")
    for t in (task, fork):
        t.continue_gen(tiny_loader.encode(" and then"), max_tokens=5)
        sched.add_task(t)
    sched.run()
    assert task.output == fork.output and task.output != [4000] * 5
    assert task.logit_bias is None


@pytest.mark.parametrize("bias,words", [
    ({65536: 1.0}, "Maximum value is 65535"),
    ({-1: 1.0}, "Invalid key"),
    ({True: 1.0}, "Invalid key"),
    ({5: 100.5}, "from -100 to 100"),
    ({5: float("nan")}, "from -100 to 100"),
    ({5: True}, "from -100 to 100"),
    ({5: "1"}, "from -100 to 100"),
    ({5: 10**400}, "from -100 to 100"),
    ({10**5000: 1.0}, "Invalid key in 'logit_bias': <an integer of thousands of digits>"),
    ({i: 1.0 for i in range(301)}, "at most 300"),
    ([(5, 1.0)], "must map token ids"),
])
def test_add_task_refuses_a_bad_bias(tiny_loader, bias, words):
    sched = DynamicScheduler(tiny_loader, max_batch_size=1)
    task = Task([1, 2], max_tokens=2)
    task.logit_bias = bias
    with pytest.raises(ValueError, match=words):
        sched.add_task(task)
    assert not sched.waiting


# ---- over HTTP ---------------------------------------------------------------------------------
def completion(http, **kw) -> dict:
    r = http.post("/v1/completions", json={"prompt": PROMPT_IDS, "max_tokens": 5, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def test_completion_and_chat_follow_the_bias(http, tiny_loader):
    """A completion banning its greedy first token starts otherwise; +100 on " hello" at
    temperature 1.5 makes a completion and a chat reply of that word alone."""
    first = completion(http, temperature=0, logprobs=0)["choices"][0]["logprobs"]["tokens"][0]
    first_id = tiny_loader.encode(first)
    assert len(first_id) == 1
    banned = completion(http, temperature=0, logprobs=0,
                        logit_bias={str(first_id[0]): -100})
    assert banned["choices"][0]["logprobs"]["tokens"][0] != first
    hello = tiny_loader.encode(" hello")
    assert len(hello) == 1
    lift = {str(hello[0]): 100}
    assert completion(http, temperature=1.5, seed=1, logit_bias=lift)["choices"][0]["text"] \
        == " hello" * 5
    r = http.post("/v1/chat/completions", json=dict(
        model="rwkv-7", messages=[{"role": "user", "content": "hi"}], max_tokens=4,
        temperature=1.5, reasoning_effort="none", logit_bias=lift))
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "hello" + " hello" * 3


@pytest.mark.parametrize("bias", [None, {}])
def test_no_bias_is_no_bias(http, bias):
    assert completion(http, temperature=0, logit_bias=bias)["choices"][0]["text"] == \
        completion(http, temperature=0)["choices"][0]["text"]


@pytest.mark.parametrize("bias,words", [
    ({"abc": 1}, "Invalid key in 'logit_bias': 'abc'"),
    ({"1.0": 1}, "Invalid key"),
    ({"-3": 1}, "Invalid key"),
    ({"65536": 1}, "Maximum value is 65535"),
    ({"5": 101}, "Invalid value in 'logit_bias' for token 5"),
    ({"5": "x"}, "Invalid value"),
    ({"5": 10**400}, "Invalid value"),
    ({"1" * 5000: 1}, "(5000 digits). Maximum value is 65535"),
    ({str(i): 1 for i in range(301)}, "at most 300"),
    ([[5, 1]], None),
])
def test_bad_biases_are_400s_naming_logit_bias(http, bias, words):
    assert_refused_on_both(http, "logit_bias", bias, words)


def test_a_bias_of_too_many_entries_is_refused_before_any_key_is_read(http):
    """The entry count comes first: an 8 MB object's keys were each parsed on the event loop
    (~0.3 s for 800,000) before the count refused it (session 54's note). Too many keys that
    are no token ids are refused for their count (a 400 on the OpenAI routes, a 422 on the
    Task API's, as any object of too many entries), and no key of such an object is read."""
    from server.api.response_format import FieldError, request_logit_bias

    class Unread(dict):
        def items(self):
            raise AssertionError("a key was read")
        keys = values = __iter__ = items

    with pytest.raises(FieldError, match="^logit_bias has 301 entries; at most 300$"):
        request_logit_bias(Unread({str(i): 1 for i in range(301)}), 65536)
    bad, words = {f"x{i}": 1 for i in range(301)}, "logit_bias has 301 entries; at most 300"
    assert_refused_on_both(http, "logit_bias", bad, words)
    r = http.post("/v1/tasks/tmp", json={"prompt": "x", "logit_bias": bad})
    assert r.status_code == 422 and r.json()["detail"][0]["msg"] == words, r.text


def test_a_bias_of_exactly_the_most_entries_is_taken(http):
    """``LOGIT_BIAS_MAX`` (OpenAI's 300) entries is a usable bias, not one too many: the count
    checked before any key is read refuses only past it (a mutation of that check to ``>=``
    refused a 300-entry bias that OpenAI takes, and no test failed: session 55's mutation
    testing). Taken on an OpenAI route and on the Task API's."""
    from server.api.response_format import request_logit_bias
    from server.task.task import LOGIT_BIAS_MAX

    bias = {str(i): -1 for i in range(1, LOGIT_BIAS_MAX + 1)}
    assert request_logit_bias(bias, 65536) == {i: -1.0 for i in range(1, LOGIT_BIAS_MAX + 1)}
    completion(http, temperature=0, logit_bias=bias)  # (a 200)
    r = http.post("/v1/tasks/tmp", json={"prompt": "x", "max_tokens": 2, "logit_bias": bias})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("change, words", [
    (lambda t: setattr(t, "logit_bias", {10 ** 6: 1.0}), "logit_bias"),
    (lambda t: setattr(t, "temperature", float("nan")), "temperature")])
def test_a_parameter_broken_after_add_task_fails_its_task_alone(tiny_loader, change, words):
    """Set on a queued task after ``add_task`` checked it (the SDK's misuse), a bias past the
    vocabulary raised in the pulse and failed every task of the batch, a neighbour decoding
    beside it too (a review, session 49): admission checks again, and fails it alone."""
    prompt = tiny_loader.encode("User: q\n\nAssistant:")
    alone = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=2)
    solo = greedy(alone, prompt, 8)
    alone.run()
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=2)
    good = greedy(sched, prompt, 8)
    sched.step()  # decoding
    bad = greedy(sched, prompt, 4)
    change(bad)
    sched.run()
    assert (good.finish_reason, good.output) == ("length", solo.output)
    assert bad.finish_reason == "error" and words in bad.error and bad.output == []
    assert bad.error.count(bad.task_id) == 1, bad.error  # (named once)
