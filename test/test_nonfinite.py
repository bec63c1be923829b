"""A row whose model output becomes NaN or infinite (a numeric overflow, a broken imported
state) fails its task alone, naming the cause, instead of returning garbage tokens drawn from
NaN logits; the other rows of its batch go on unchanged (engine.REASON_NONFINITE)."""

import json
import time

import pytest
import torch
from fastapi.testclient import TestClient

from server.model.state import State
from server.scheduler import DynamicScheduler
from server.scheduler.cycle import NONFINITE_ERROR
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Status, Task

PROMPT = "User: hello there\n\nAssistant:"


def huge_state(cfg) -> State:
    """A state whose WKV entries are 1e20 (finite in fp32): the first output is NaN."""
    L, C, H, N = cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.head_size
    return State(torch.zeros(L, 2, 1, C), torch.full((L, 1, H, N, N), 1e20))


def greedy(sched, tokens, **kw):
    return sched.new_task(tokens, max_tokens=6, temperature=0.0, **kw)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA")])])
def loader(request, tiny_loader, tiny_model_path):
    """The tiny model on the CPU (the torch bookkeeping), and on CUDA in fp16 (the Triton step
    bookkeeping, the decode graphs and the sampler's kernels)."""
    if request.param == "cpu":
        return tiny_loader
    from server.model.loader import RWKV070ModelLoader
    return RWKV070ModelLoader(tiny_model_path, device="cuda", dtype="fp16")


def test_a_row_whose_output_is_nan_fails_alone(loader):
    tiny_loader = loader
    tokens = tiny_loader.encode(PROMPT)
    alone = DynamicScheduler(tiny_loader, max_batch_size=1, buffer_size=4)
    want = greedy(alone, tokens)
    alone.run()
    assert len(want.output) == 6

    sched = DynamicScheduler(tiny_loader, max_batch_size=8, buffer_size=4)
    good = greedy(sched, tokens)
    # broken rows of each sampler path: argmax, top-k, the whole vocabulary, sorted top-p
    kinds = [dict(temperature=0.0), dict(temperature=1.0, top_k=20, top_p=0.9),
             dict(temperature=1.0, top_k=0, top_p=1.0), dict(temperature=1.0, top_k=0, top_p=0.5)]
    bad = [Task(tokens, max_tokens=6, **kw) for kw in kinds]
    for task in bad:
        task.state = huge_state(tiny_loader.cfg)
        sched.add_task(task)
    sampled = sched.new_task(tokens, max_tokens=6, temperature=1.0, top_k=0, top_p=1.0, seed=3)
    sched.run()
    for task in bad:
        assert task.status == Status.FINISHED and task.finish_reason == "error"
        assert task.error == NONFINITE_ERROR and "NaN or infinite" in task.error
        assert task.output == []  # no token drawn from NaN logits
    assert good.finish_reason == "length" and good.output == want.output
    assert sampled.finish_reason == "length" and len(sampled.output) == 6


def test_a_decode_step_gone_nan_fails_the_round_and_keeps_the_admitted_state(loader):
    """The first step of a continued task is a decode step (not a prefill pass's kept
    logits): its NaN ends the row there. The task is back to the state and history it was
    admitted with, so the round can be retried from it."""
    tiny_loader = loader
    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    task = greedy(sched, tiny_loader.encode(PROMPT))
    sched.run()
    assert task.finish_reason == "length"
    task.state = huge_state(tiny_loader.cfg)  # (as if its state had overflowed)
    history, current = list(task.history), task.current_token
    task.continue_gen(max_tokens=4)
    sched.add_task(task)
    sched.run()
    assert task.finish_reason == "error" and task.error == NONFINITE_ERROR
    assert task.round_tokens() == []
    assert task.history == history and task.current_token == current
    assert torch.equal(task.state.wkv, huge_state(tiny_loader.cfg).wkv)
    assert sched.capacity == 1 and sched.num_active == 0  # its slot was freed


def test_a_row_broken_mid_reply_keeps_nothing_of_the_round_and_retries_the_same(
        tiny_model_path, monkeypatch):
    """A row whose logits go NaN after tokens were accepted (the model's output made NaN at
    its 5th decode step): its task fails with the tokens it had shown; history and prompt are
    back to their admitted values; its end state is not cached (the prefix cache holds what a
    run of the healthy twin alone holds); a retry gives the twin's reply; the twin beside it
    is unchanged. (A model without split invariance: only there does the cache keep a
    finished task's end state.)"""
    from server.model.loader import RWKV070ModelLoader

    tiny_loader = RWKV070ModelLoader(tiny_model_path, device="cpu", split_invariant=False)
    tokens = tiny_loader.encode("User: tell me a long story about a cat and a dog\n\nAssistant:")
    assert len(tokens) >= 16  # (the cache's shortest entry)

    def run(break_a: bool):
        sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=4,
                                 prefix_cache=PrefixCache(64 << 20, "cpu"))
        a, b = (Task(list(tokens), max_tokens=12, temperature=0.0) for _ in range(2))
        for t in (a, b):
            t.cache_origin = ""  # (in the prefix cache, as the API's tasks are)
        sched.add_task(b)
        if break_a:
            sched.add_task(a)
            model, calls = sched.engine.model, [0]
            decode = model.decode

            def nan_in_a(*args, **kw):
                out = decode(*args, **kw)
                calls[0] += 1
                if calls[0] == 5:
                    out = out.clone()
                    out[sched.slots.index(a)] = float("nan")
                return out
            monkeypatch.setattr(model, "decode", nan_in_a)
        sched.run()
        monkeypatch.undo()
        return sched, a, b

    _, _, twin = run(False)
    sched, a, b = run(True)
    assert a.finish_reason == "error" and a.error == NONFINITE_ERROR
    assert 1 <= len(a.output) < 12 and a.output == twin.output[:len(a.output)]
    assert a.history == [] and a.pending == tokens and a.current_token is None
    assert b.finish_reason == "length" and b.output == twin.output
    # b's end state is cached (its whole history); a's, shorter, is not
    cached = sorted(sched.prefiller.cache._lengths.get("", []))
    assert cached and cached[-1] == len(b.history), (cached, len(b.history))
    assert not [n for n in cached if len(tokens) < n < len(b.history)], cached
    a.continue_gen()
    sched.add_task(a)
    sched.run()
    assert a.finish_reason == "length" and a.output == twin.output


def _huge_state(cfg, value: float) -> bytes:
    from test_state_files import tuning_file

    return tuning_file(cfg, 2, dtype=torch.float32, scale=1.0, **{
        f"blocks.{i}.att.time_state": torch.full((cfg.n_head, cfg.head_size, cfg.head_size),
                                                 value) for i in range(cfg.n_layer)})


@pytest.mark.parametrize("value", [1e20, 1e30])
def test_a_state_that_makes_the_output_nan_is_refused_at_import(tiny_model_path, tmp_path,
                                                                value):
    """States of 1e20 or 1e30 are finite in fp32 (the range check passes them) but make the
    model's output NaN: stored, every fork of the template and every request naming it was a
    500 (a QA report, session 71). The import generates a few tokens from a copy of the
    state first (``TaskService.trial``): a 422 naming the overflow, nothing stored;
    a sane state imports as before; while the server shuts down, a 503 and nothing stored."""
    from server.api.app import create_app
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"), state_dtype="fp32")
    with TestClient(create_app(settings)) as client:
        cfg = client.app.state.runtime.loader.cfg
        r = client.post("/v1/tasks/import_state?name=_huge", content=_huge_state(cfg, value))
        assert r.status_code == 422, r.text
        assert "NaN or infinite" in r.json()["detail"], r.text
        assert client.get("/v1/tasks/_huge/status").status_code == 404
        assert "rwkv-7:_huge" not in client.get("/v1/models").text
        assert client.get("/v1/tasks/list").json()["cpu_tasks"] == []  # (the trial's copy)
        r = client.post("/v1/tasks/import_state?name=_sane", content=_huge_state(cfg, 0.5))
        assert r.status_code == 200, r.text
        r = client.post("/v1/tasks/_sane/fork", json={"prompt": "hi", "max_tokens": 2})
        assert r.status_code == 200, r.text
        client.app.state.drain.begin()
        r = client.post("/v1/tasks/import_state?name=_late", content=_huge_state(cfg, 0.5))
        assert r.status_code == 503 and "shutting down" in r.text, r.text
        assert client.get("/v1/tasks/_late/status").status_code == 404


def test_a_shutdown_during_the_trial_refuses_the_import(tiny_model_path, tmp_path,
                                                        monkeypatch):
    """A shutdown that begins while the import's trial runs (``TaskService.trial``) stops it:
    a 503 and nothing stored, not the template of a state whose trial was cut short (a stopped
    trial ends "abort", neither a pass nor the overflow). The trial is made 2,000 tokens long
    here so that it is still running when the shutdown begins, right after it is submitted.
    And the trial leaves no prefix-cache entry behind (``cache_origin`` None): an exported
    task's state (105 tokens of history), served without split invariance (``align`` 1: a
    finished task's state is cached), added an entry keyed to the trial's tokens."""
    from server.api import task_service
    from server.api.app import create_app
    from server.api.task_service import TaskService
    from server.config import Settings

    submit = TaskService.submit

    def submit_then_shut_down(self, task):
        submit(self, task)
        if task.task_id.startswith("TMP") and task.max_tokens == 2000:  # (the trial)
            self.drain.begin()

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"), state_dtype="fp32",
                        split_invariant=False)
    prompt = "User: " + "hello there, how are you today? " * 12 + "\n\nAssistant:"
    with TestClient(create_app(settings)) as client:
        tid = client.post("/v1/tasks/create", json={
            "prompt": prompt, "max_tokens": 4, "temperature": 0}).json()["task_id"]
        for _ in range(200):
            if client.get(f"/v1/tasks/{tid}/get_result").json()["finished"]:
                break
            time.sleep(0.05)
        data = client.get(f"/v1/tasks/{tid}/export_state").content
        entries = client.get("/health").json()["prefix_cache"]["entries"]
        r = client.post("/v1/tasks/import_state?name=_kept", content=data)
        assert r.status_code == 200 and r.json()["history_tokens"] == 105, r.text
        assert client.get("/health").json()["prefix_cache"]["entries"] == entries
        monkeypatch.setattr(task_service, "TRIAL_TOKENS", 2000)
        monkeypatch.setattr(TaskService, "submit", submit_then_shut_down)
        r = client.post("/v1/tasks/import_state?name=_cut", content=data)
        assert r.status_code == 503 and "shutting down" in r.text, r.text
        assert client.get("/v1/tasks/_cut/status").status_code == 404
        assert client.get("/v1/tasks/_kept/status").status_code == 200


def test_a_client_that_leaves_during_the_trial_stops_it(tiny_model_path, tmp_path,
                                                        monkeypatch):
    """The import's client gives up while its trial runs (made 100,000 tokens long here): the
    trial is stopped, not run to its end for nobody, and nothing is stored (``trial`` watches
    its client; untested until session 73)."""
    import httpx

    from openai_helpers import LiveServer
    from server.api import task_service
    from server.api.task_service import TaskService
    from server.config import Settings

    trials = []
    submit = TaskService.submit

    def noting_the_trial(self, task):
        if task.task_id.startswith("TMP"):  # (the trial: nothing else is submitted here)
            trials.append(task)
        submit(self, task)

    monkeypatch.setattr(TaskService, "submit", noting_the_trial)
    monkeypatch.setattr(task_service, "TRIAL_TOKENS", 100_000)
    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"), state_dtype="fp32")
    with LiveServer(settings) as srv:
        data = _huge_state(srv.runtime.loader.cfg, 0.5)
        with pytest.raises(httpx.TimeoutException):  # (its read times out: it closes)
            httpx.post(srv.url + "/v1/tasks/import_state?name=_gone", content=data,
                       timeout=httpx.Timeout(60, read=1.0))
        deadline = time.time() + 30
        while not (trials and trials[0].is_finished) and time.time() < deadline:
            time.sleep(0.05)
        assert trials and trials[0].is_finished, "the trial ran on after its client left"
        assert trials[0].finish_reason == "abort" and len(trials[0].round_output()) < 100_000
        r = httpx.get(srv.url + "/v1/tasks/_gone/status")
        assert r.status_code == 404, r.text


@pytest.mark.parametrize("ending", [("stop", None), ("error", "RuntimeError: boom")])
def test_the_trials_other_endings(tiny_model_path, tmp_path, monkeypatch, ending):
    """The import's trial may end at end-of-text or a turn's end within its tokens ("stop"):
    a pass, stored as after "length" (were only "length" a pass, such a state was a 400 "the
    client closed the request"); a failure that is not the overflow (a pulse's fault) is a 500
    not to be retried, nothing stored, not a 422 blaming the file (session 72's mutation
    review). The trial's ending is made here, in place of the scheduler's."""
    from server.api.app import create_app
    from server.api.task_service import TaskService
    from server.config import Settings

    submit = TaskService.submit

    def end_the_trial(self, task):
        if task.task_id.startswith("TMP"):  # (the trial: nothing else is submitted here)
            task._finish(*ending)
            return
        submit(self, task)

    monkeypatch.setattr(TaskService, "submit", end_the_trial)
    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"), state_dtype="fp32")
    with TestClient(create_app(settings)) as client:
        cfg = client.app.state.runtime.loader.cfg
        r = client.post("/v1/tasks/import_state?name=_ended", content=_huge_state(cfg, 0.5))
        if ending[0] == "stop":
            assert r.status_code == 200, r.text
            assert client.get("/v1/tasks/_ended/status").status_code == 200
        else:
            assert r.status_code == 500 and "boom" in r.text, r.text
            assert r.headers.get("x-should-retry") == "false"
            assert client.get("/v1/tasks/_ended/status").status_code == 404


def test_requests_from_a_state_that_makes_the_output_nan_fail_with_strict_json(
        tiny_model_path, tmp_path, monkeypatch):
    """A state of 1e20 (within fp32) makes the model's output NaN. Its requests returned
    garbage text with a 200, or a 500 for log probabilities ("Out of range float values are
    not JSON compliant") and ``"logprob":NaN`` in streams (session 66's QA). Now both OpenAI
    routes answer a 500 naming the overflow (an error event in a stream), every reply strict
    JSON. (The import refuses such a state since session 71: its trial is skipped here, as
    for a state that overflows only later in a reply.)"""
    from server.api.app import create_app
    from server.api.task_service import TaskService
    from server.config import Settings

    async def no_trial(self, template, request):
        return None
    monkeypatch.setattr(TaskService, "trial", no_trial)

    def strict(text: str):
        def refuse(name):
            raise ValueError(f"non-JSON constant {name}")
        return json.loads(text, parse_constant=refuse)

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path / "t.db"), state_dtype="fp32")
    with TestClient(create_app(settings)) as client:
        cfg = client.app.state.runtime.loader.cfg
        r = client.post("/v1/tasks/import_state?name=_huge", content=_huge_state(cfg, 1e20))
        assert r.status_code == 200, r.text
        chat = {"model": "rwkv-7:_huge", "max_tokens": 2, "logprobs": True, "top_logprobs": 2,
                "messages": [{"role": "user", "content": "hi"}]}
        done = {"model": "rwkv-7:_huge", "max_tokens": 2, "prompt": "hi", "logprobs": 2}
        for path, body in (("/v1/chat/completions", chat), ("/v1/completions", done)):
            r = client.post(path, json=body)
            assert r.status_code == 500, r.text
            assert "NaN or infinite" in strict(r.text)["error"]["message"]
            with client.stream("POST", path, json={**body, "stream": True}) as s:
                assert s.status_code == 200
                events = [line[6:] for line in s.iter_lines() if line.startswith("data: ")]
            parsed = [strict(e) for e in events if e != "[DONE]"]
            assert any("NaN or infinite" in json.dumps(e) for e in parsed), events
        metrics = client.get("/metrics").text
        assert "rwkv_nonfinite_tasks_total 4.0" in metrics  # (two routes, stream or not)
        # the same model serves a healthy request after them
        r = client.post("/v1/chat/completions", json={
            "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "length"


def test_replies_write_non_finite_numbers_as_strings():
    """The OpenAI routes' replies (``SafeJSONResponse``) and stream events (``sse_json``) stay
    strict JSON should a non-finite number reach them (a log probability of a row whose
    logits are partly NaN: strict parsers refused ``NaN``, the SDKs retried a 500)."""
    from server.api.safe_json import SafeJSONResponse, sse_json

    obj = {"logprob": float("nan"), "top": [{"logprob": float("-inf")}], "text": "é\u2028"}

    def refuse(name):
        raise ValueError(f"non-JSON constant {name}")
    body = json.loads(SafeJSONResponse(obj).body, parse_constant=refuse)
    event = sse_json(obj)
    assert "\u2028" not in event  # (one line: the SSE line-break escape stays)
    for got in (body, json.loads(event, parse_constant=refuse)):
        assert got == {"logprob": "nan", "top": [{"logprob": "-inf"}], "text": "é\u2028"}
