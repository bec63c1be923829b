"""Prefix cache, state files and /metrics over HTTP (in-process servers on the tiny random model).

Two servers run the same model: ``on`` (prefix cache of 8 MB) and ``off`` (``RWKV_STATE_CACHE_MB=0``);
replies must be equal, and the ``on`` server's prefill counter (``/health``) must show that only
new tokens were computed.
"""

from __future__ import annotations

import io
import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families

from openai_helpers import LiveServer
from server.api.chat import build_chat_prompt, history_text

TURN = 261  # "\n\n"
GREEDY = {"temperature": 0, "reasoning_effort": "none"}


def make_settings(model, tmp, **kw):
    from server.config import Settings

    kw = {"api_key": None, **kw}
    return Settings(model_path=model, demo=None, device="cpu", task_db_path=str(tmp / "t.db"),
                    verbose=False, buffer_size=8, max_batch_size=64, **kw)


def serve(model, tmp, **kw):
    """An in-process server and an HTTP client for it."""
    with LiveServer(make_settings(model, tmp, **kw)) as srv:
        with httpx.Client(base_url=srv.url, timeout=120) as c:
            yield c


@pytest.fixture(scope="module")
def on(tiny_model_path, tmp_path_factory):
    yield from serve(tiny_model_path, tmp_path_factory.mktemp("on"), state_cache_mb=8)


@pytest.fixture(scope="module")
def off(tiny_model_path, tmp_path_factory):
    yield from serve(tiny_model_path, tmp_path_factory.mktemp("off"), state_cache_mb=0)


def cache(c: httpx.Client) -> dict:
    return c.get("/health").json()["prefix_cache"]


def after_warm(c: httpx.Client, computed: int, seconds: float = 10.0) -> dict:
    """The cache figures once the server has computed ``computed`` next-turn tokens in all
    (``warm_tokens``: it does so ``WARM_DELAY_S`` after a reply; a user reads and types longer)."""
    deadline = time.monotonic() + seconds
    while (st := cache(c))["warm_tokens"] < computed and time.monotonic() < deadline:
        time.sleep(0.01)
    return st


def stream_text(c: httpx.Client, path: str, body: dict) -> str:
    """The text of a Task API stream."""
    with c.stream("POST", path, json={**body, "stream": True}) as r:
        assert r.status_code == 200, r.read()
        return "".join(json.loads(line[6:])["data"] for line in r.iter_lines()
                       if line.startswith("data: {") and '"data"' in line)


def chat(c: httpx.Client, messages: list, **kw) -> str:
    r = c.post("/v1/chat/completions", json={"model": "rwkv-7", "messages": messages, **kw})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def test_ten_turn_chat_prefills_only_the_new_messages(on, off, tiny_tokenizer):
    """Each turn after the first prefills only its new message before its first token (and the
    previous history's last ``align`` - 1 tokens at most: states are resumed only at multiples
    of ``align``, which keeps outputs bit-exact): the previous reply, as the client re-sends it,
    was computed after that reply (``warm_tokens``: from the boundary before it; the next turn
    is sent once it is, as a user's would be) and cached; the turn's own boundaries come out of
    its pass (``boundaries_kept``), none is computed again after its first token
    (``later_tokens``). Replies equal the cache-off server's."""
    system = "System: " + "You are a patient tutor who explains step by step. " * 14
    messages = [{"role": "system", "content": system}]
    warmed = None  # the previous turn's history with its reply, as the next prompt starts
    start = cache(on)  # (the module's other tests may have used the server: pytest-xdist
    # runs a module's tests on several workers, each with its own servers, in any share)
    want_warm = start["warm_tokens"]  # tokens the warm-ups of the previous turns compute
    align = cache(on)["align"]
    assert align == 32  # the CPU's WKV chunk (wkv.SUB): RWKV_SPLIT_INVARIANT is on by default
    down = lambda n: n - n % align  # noqa: E731 - where a state is kept and resumed
    for turn in range(10):
        question = f"Turn {turn}: " + "please explain the next idea in more detail, " * 21 + "ok?"
        messages.append({"role": "user", "content": question})
        tokens = tiny_tokenizer.encode(build_chat_prompt(messages, think=False))
        before = after_warm(on, want_warm)
        reply = chat(on, messages, max_tokens=32, **GREEDY)
        after = cache(on)
        fed = after["prefilled_tokens"] - before["prefilled_tokens"]
        assert after["prefill_calls"] - before["prefill_calls"] == 1  # one model call
        later = after["later_tokens"] - before["later_tokens"]  # computed again
        kept = after["boundaries_kept"] - before["boundaries_kept"]
        assert reply == chat(off, messages, max_tokens=32, **GREEDY)  # outputs equal
        last = down(len(tokens) - 1 - tokens[::-1].index(TURN))
        assert later == 0 and kept >= 1  # its boundaries, from its own pass
        if warmed is None:
            assert fed == len(tokens)  # the last token too: the first token comes from it
            assert kept == 2  # the system prompt's end too
        else:  # from the end of the previous reply: the new message only
            w = len(warmed)
            assert tokens[:w] == warmed, "the next prompt does not start with the warmed history"
            assert fed == len(tokens) - down(w), (fed, len(tokens), w)
            assert after["warm_tokens"] == want_warm
            assert after["warm_dropped"] == start["warm_dropped"]
        messages.append({"role": "assistant", "content": reply})
        warmed = tiny_tokenizer.encode(history_text(messages))
        want_warm += down(len(warmed)) - last  # from this prompt's last boundary
    assert len(tokens) > 1800
    st = cache(on)
    assert st["hits"] - start["hits"] >= 9 and st["tokens_saved"] - start["tokens_saved"] > 8000
    assert st["bytes"] <= st["max_bytes"] and cache(off)["warm_tokens"] == 0


def test_a_chat_from_a_template_prefills_only_the_new_messages(on, off, tiny_tokenizer):
    """A chat naming a template (``rwkv-7:_name``: the template's state, then the messages)
    resumes its previous turns from the cache as a plain chat does, its states keyed by the
    template's own state and counted from its history's end (most templates' history is no
    multiple of ``align``: such chats resumed nothing past the template before session 37).
    Each later turn prefills only its new message; replies equal the cache-off server's."""
    system = "System: " + "You answer as a ship's navigator would, in few words. " * 9 + "\n\n"
    sys_tokens = tiny_tokenizer.encode(system)
    base = len(sys_tokens) - 1  # the template's history (its last token waits, as a head)
    align = cache(on)["align"]
    assert base % align, "the test wants a template whose history is off the zero state's rule"
    down = lambda n: n - (n - base) % align  # noqa: E731 - where a state is kept and resumed
    models = {}
    for c in (on, off):
        made = c.post("/v1/tasks/create", json={"prompt": system, "max_tokens": 0}).json()
        tpl = c.post(f"/v1/tasks/{made['task_id']}/as_template").json()["task_id"]
        models[c] = f"rwkv-7:{tpl}"
    messages, warmed, start = [], None, cache(on)
    for turn in range(4):
        messages.append({"role": "user", "content": f"Turn {turn}: " + "where are we now? " * 20})
        tokens = sys_tokens + tiny_tokenizer.encode(build_chat_prompt(messages, think=False))
        before = after_warm(on, start["warm_tokens"] + (0 if warmed is None else 1))
        replies = [c.post("/v1/chat/completions", json={
            "model": models[c], "messages": messages, "max_tokens": 24, **GREEDY})
            for c in (on, off)]
        assert all(r.status_code == 200 for r in replies), replies[0].text
        reply, other = (r.json()["choices"][0]["message"]["content"] for r in replies)
        assert reply == other  # outputs equal
        fed = cache(on)["prefilled_tokens"] - before["prefilled_tokens"]
        if warmed is None:
            assert fed == len(tokens) - base  # the template's history is its state
        else:  # from the end of the previous reply (warmed after it): the new message only
            assert tokens[:len(warmed)] == warmed
            assert fed == len(tokens) - down(len(warmed)), (fed, len(tokens), len(warmed))
        messages.append({"role": "assistant", "content": reply})
        warmed = sys_tokens + tiny_tokenizer.encode(history_text(messages))
    assert cache(on)["hits"] - start["hits"] >= 3


@pytest.mark.parametrize("sampling", [{"temperature": 0},
                                      {"temperature": 1.0, "top_p": 0.8, "seed": 11}])
@pytest.mark.parametrize("route", ["/v1/tasks/tmp", "/v1/tasks/create"])
def test_task_api_results_equal_without_cache(on, off, route, sampling):
    prompt = f"User: {route} {sampling} " + "tell me a long story about rivers. " * 12
    body = {"prompt": prompt + "\n\nAssistant:", "max_tokens": 24, "stream": True, **sampling}

    def text(c):
        return stream_text(c, route, body)

    first, second = text(on), text(on)  # the second starts from the cached prompt state
    assert cache(on)["hits"] >= 1
    assert first == second == text(off) != ""


def test_streamed_reply_is_warmed_for_the_next_turn(on, tiny_tokenizer):
    """A streamed chat reply (as Open WebUI or LobeChat read it) is computed for the next turn
    too: that turn prefills only its new message. (15 repeats: the history with the reply, 135
    tokens, reaches a multiple of ``align``, 128, at which the prompt's own pass kept no state,
    so the next turn resumes from the warm-up's; with 12, the history's multiple was one the
    prompt's pass had kept: the warm-up had nothing to compute, and the test waited 10 s for
    it.)"""
    messages = [{"role": "system", "content": "Streaming system prompt, long enough. " * 15},
                {"role": "user", "content": "Stream me a short answer, please."}]
    warm = cache(on)["warm_tokens"]
    body = {"model": "rwkv-7", "messages": messages, "max_tokens": 12, "stream": True, **GREEDY}
    with on.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        reply = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                        for line in r.iter_lines()
                        if line.startswith("data: {") and '"choices":[{' in line)
    messages += [{"role": "assistant", "content": reply},
                 {"role": "user", "content": "And one more sentence."}]
    history = tiny_tokenizer.encode(history_text(messages[:-1]))
    tokens = tiny_tokenizer.encode(build_chat_prompt(messages, think=False))
    assert tokens[:len(history)] == history
    before = after_warm(on, warm + 1)
    assert before["warm_tokens"] > warm  # the streamed reply's history was computed after it
    chat(on, messages, max_tokens=4, **GREEDY)
    resumed = len(history) - len(history) % before["align"]
    assert cache(on)["prefilled_tokens"] - before["prefilled_tokens"] == len(tokens) - resumed


def test_only_single_chat_replies_are_warmed(tiny_model_path, tmp_path):
    """The next-turn warm-up is queued for a chat reply (n = 1: from the zero state, or from a
    template's state, keyed by it), not for n = 2 choices, nor with RWKV_CHAT_WARM_NEXT_TURN
    off."""
    msgs = [{"role": "system", "content": "Gating system prompt, long enough to cache. " * 10},
            {"role": "user", "content": "Say something."}]
    body = {"model": "rwkv-7", "messages": msgs, "max_tokens": 3, **GREEDY}
    for warm_on in (True, False):
        settings = make_settings(tiny_model_path, tmp_path / str(warm_on), state_cache_mb=8,
                                 chat_warm_next_turn=warm_on)
        with LiveServer(settings) as srv, httpx.Client(base_url=srv.url, timeout=120) as c:
            calls = []
            sched = srv.runtime.scheduler
            real = sched.warm_prefix
            sched.warm_prefix = lambda origin, tokens: (calls.append(origin), real(origin, tokens))
            assert c.post("/v1/chat/completions", json=body).status_code == 200
            assert calls == ([""] if warm_on else [])
            assert c.post("/v1/chat/completions", json={**body, "n": 2}).status_code == 200
            made = c.post("/v1/tasks/create", json={"prompt": "System: be brief.\n\n",
                                                    "max_tokens": 0}).json()
            assert made["finished"] is True
            tpl = c.post(f"/v1/tasks/{made['task_id']}/as_template").json()["task_id"]
            r = c.post("/v1/chat/completions", json={**body, "model": f"rwkv-7:{tpl}"})
            assert r.status_code == 200, r.text
            origin = srv.runtime.manager.get_task(tpl).cache_origin  # its own state's
            assert origin.startswith("state:")
            assert calls == (["", origin] if warm_on else [])


def test_chat_seeded_equal_without_cache(on, off):
    msgs = [{"role": "system", "content": "Seeded system prompt, long enough. " * 12},
            {"role": "user", "content": "Pick a number and explain why."}]
    kw = {"max_tokens": 16, "temperature": 1.0, "top_p": 0.9, "seed": 1234,
          "reasoning_effort": "none"}
    hits = cache(on)["hits"]
    first, second = chat(on, msgs, **kw), chat(on, msgs, **kw)
    assert cache(on)["hits"] == hits + 1  # the second request started from the cached prompt
    assert first == second == chat(off, msgs, **kw) != ""


def test_sixty_four_requests_share_one_system_prompt(on, tiny_tokenizer):
    system = "System: " + "Answer as a concise, friendly expert on astronomy and space. " * 84
    msgs = [[{"role": "system", "content": system},
             {"role": "user", "content": f"Question {i}: how far away is object {i}?"}]
            for i in range(64)]
    tokens = [tiny_tokenizer.encode(build_chat_prompt(m, think=False)) for m in msgs]
    n_sys = tokens[0].index(TURN)  # the state after the system message is the shared prefix
    assert n_sys >= 1000 and all(t[:n_sys] == tokens[0][:n_sys] for t in tokens)
    before = cache(on)
    n_sys -= n_sys % before["align"]  # kept there (a multiple of ``align``)
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda m: chat(on, m, max_tokens=1, **GREEDY), msgs))
    after = cache(on)
    fed = after["prefilled_tokens"] - before["prefilled_tokens"]
    assert len(replies) == 64
    assert fed <= n_sys + sum(len(t) - n_sys for t in tokens) < 2 * n_sys + 64 * (20 + 32)
    assert after["hits"] - before["hits"] >= 63
    assert after["tokens_saved"] - before["tokens_saved"] >= 63 * n_sys


def test_memory_bound_under_a_flood(on):
    # one request a prompt: a whole prompt is kept (with its logits) from a pass of it alone; a
    # batched pass keeps one only at a multiple of ``align`` (since session 30), so a flood sent
    # as one request of 64 prompts kept nearly nothing and passed on earlier tests' entries
    for k in range(2):
        for i in range(64):
            prompt = f"Flood {k}-{i}: " + "distinct words here " * (8 + i % 5)
            r = on.post("/v1/completions",
                        json={"prompt": prompt, "max_tokens": 1, "temperature": 0})
            assert r.status_code == 200, r.text
        st = cache(on)
        assert 0 < st["bytes"] <= st["max_bytes"] == 8 << 20
    assert st["evictions"] > 0


def test_import_export_round_trip(on, tiny_loader):
    made = on.post("/v1/tasks/create", json={"prompt": "User: hello, who are you?\n\nAssistant:",
                                             "max_tokens": 0}).json()
    tid = made["task_id"]
    exported = on.get(f"/v1/tasks/{tid}/export_state")
    assert exported.status_code == 200
    assert exported.headers["content-type"] == "application/octet-stream"
    r = on.post("/v1/tasks/import_state", params={"name": "greeter"}, content=exported.content)
    assert r.status_code == 200 and r.json()["task_id"] == "_greeter"
    assert r.json()["format"] == "rwkv-server-state" and r.json()["history_tokens"] > 0
    again = on.post("/v1/tasks/import_state", params={"name": "_greeter"}, content=exported.content)
    assert again.status_code == 409
    # the template continues exactly as the task it came from
    body = {"prompt": " I am", "max_tokens": 12, "temperature": 0}
    forked = stream_text(on, f"/v1/tasks/{tid}/fork", body)
    assert forked == stream_text(on, "/v1/tasks/_greeter/fork", body) != ""
    # OpenAI requests naming the template start from its state
    comp = {"prompt": " I am", "max_tokens": 12, "temperature": 0}
    via_tpl = on.post("/v1/completions", json={"model": "rwkv-7:_greeter", **comp}).json()
    full = on.post("/v1/completions", json={
        **comp, "prompt": "User: hello, who are you?\n\nAssistant: I am"}).json()
    assert via_tpl["choices"][0]["text"] == full["choices"][0]["text"] != ""
    # an empty prompt goes on from the template's state, as the full prompt would (it fed an
    # end-of-text token first: session 25's QA)
    empty = {"prompt": "", "max_tokens": 12, "temperature": 0}
    via_tpl = on.post("/v1/completions", json={"model": "rwkv-7:_greeter", **empty}).json()
    full = on.post("/v1/completions", json={
        **empty, "prompt": "User: hello, who are you?\n\nAssistant:"}).json()
    assert via_tpl["choices"][0]["text"] == full["choices"][0]["text"] != ""
    r = on.post("/v1/chat/completions", json={"model": "rwkv-7:_missing",
                                              "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    # a name JSON can carry but no stored id holds (a lone surrogate): unknown too, on both
    # routes (it was a 500 from the task store's query; session 39's QA)
    for route, body in (("chat/completions", '"messages": [{"role": "user", "content": "hi"}]'),
                        ("completions", '"prompt": "hi"')):
        r = on.post(f"/v1/{route}", content='{"model": "rwkv-7:_\\ud800", %s}' % body,
                    headers={"content-type": "application/json"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found", r.text
    # the template named without its '_' is refused with the id it meant (it was served by the
    # base model); other names with a colon are unknown models, served as before
    loaded = on.get("/v1/models").json()["data"][0]["id"]
    for model in ("rwkv-7:greeter", f"{loaded}:greeter"):
        r = on.post("/v1/completions", json={"model": model, **comp})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
        assert f"{model.split(':')[0]}:_greeter" in r.json()["error"]["message"]
    assert on.get("/v1/models/rwkv-7:greeter").status_code == 404
    plain = on.post("/v1/completions", json={"model": "rwkv-7", **comp}).json()
    for model in ("llama3:8b", "rwkv-7:latest"):  # no template of that name: unknown models
        r = on.post("/v1/completions", json={"model": model, **comp}).json()
        assert r["choices"][0]["text"] == plain["choices"][0]["text"] != "", model
    # a temporary task's state is not kept: nothing to export
    tmp = on.post("/v1/tasks/tmp", json={"prompt": "x", "max_tokens": 1, "stream": True})
    tmp_id = json.loads(tmp.text.split("data: ", 2)[1].splitlines()[0])["task_id"]
    assert on.get(f"/v1/tasks/{tmp_id}/export_state").status_code == 409
    assert on.get("/v1/tasks/TASK_nope/export_state").status_code == 404


def test_import_errors(on, tiny_loader):
    cfg = tiny_loader.cfg

    def pth(shape, layers=cfg.n_layer):
        buf = io.BytesIO()
        torch.save({f"blocks.{i}.att.time_state": torch.zeros(shape) for i in range(layers)}, buf)
        return buf.getvalue()

    H, N = cfg.n_head, cfg.head_size
    ok = on.post("/v1/tasks/import_state", params={"name": "tuned"}, content=pth((H, N, N)))
    assert ok.status_code == 200 and ok.json()["format"] == "state-tuning"
    # a state-tuning state has no next token: a fork needs a prompt (it was a 200 and an empty
    # result, session 22); with one it generates, and a prefill-only copy needs none
    listed = on.get("/v1/tasks/list").json()["total_count"]
    r = on.post("/v1/tasks/_tuned/fork", json={"max_tokens": 8})
    assert r.status_code == 422 and "give a prompt" in r.text, r.text
    assert "_tuned has no token" in r.text  # the id sent, not its copy's (session 25's QA)
    assert on.get("/v1/tasks/list").json()["total_count"] == listed  # the copy is not kept
    assert stream_text(on, "/v1/tasks/_tuned/fork", {"prompt": "Hi", "max_tokens": 4,
                                                     "temperature": 0}) != ""
    assert on.post("/v1/tasks/_tuned/fork", json={"max_tokens": 0}).status_code == 200
    for data, status, words in ((pth((H + 1, N, N)), 422, "has shape [3, 64, 64]"),
                                (pth((H, N, N), layers=5), 422, "the loaded model has 2 layers"),
                                (b"garbage" * 9, 400, "not a state file"), (b"", 400, "Empty")):
        r = on.post("/v1/tasks/import_state", params={"name": "bad"}, content=data)
        assert r.status_code == status and words in r.json()["detail"], r.text
    r = on.post("/v1/tasks/import_state", params={"name": "bad name!"}, content=pth((H, N, N)))
    assert r.status_code == 422


def test_a_limit_smaller_than_one_state_turns_the_cache_off(tiny_loader):
    """RWKV_STATE_CACHE_MB below one state of the model (e.g. 16 for a 2.9B model's ~21 MB
    state): the cache stored nothing yet reported itself enabled and still made prefill stop
    at checkpoints and recompute turn boundaries for it. It is off instead (with a warning)."""
    from types import SimpleNamespace

    from server.api.lifecycle import make_prefix_cache
    from server.model.state import State

    def settings(mb):
        return SimpleNamespace(state_cache_mb=mb, state_cache_device_fraction=0.5,
                               prefill_chunk=4096)

    two_mb = State(torch.zeros(1, 2, 1, 8), torch.zeros(1, 1, 8, 256, 256))  # 2 MB of wkv
    big = SimpleNamespace(model=SimpleNamespace(device=torch.device("cpu"),
                                                new_state=lambda batch: two_mb,
                                                split_invariant=True, prefill_align=16),
                          cfg=SimpleNamespace(vocab_size=64))
    assert make_prefix_cache(settings(1), big) is None
    assert make_prefix_cache(settings(3), big).enabled
    assert make_prefix_cache(settings(1), tiny_loader).enabled  # its state: 66 KB


def test_a_step_budget_under_any_wkv_chunk_is_refused():
    """RWKV_PREFILL_CHUNK below the WKV's chunk (32 tokens on the CPU) cut prompts inside
    chunks, where a cached state's bits differ from an uncached run's (a start-up warning
    before session 27's QA): refused now, naming the setting; 32 and past it are accepted."""
    from pydantic import ValidationError

    from server.config import Settings

    with pytest.raises(ValidationError, match="prefill_chunk"):
        Settings(prefill_chunk=16)
    assert Settings(prefill_chunk=32).prefill_chunk == 32


def test_metrics_series(on):
    chat(on, [{"role": "user", "content": "metrics please"}], max_tokens=4, **GREEDY)
    text = on.get("/metrics").text
    h = cache(on)
    for series in ('rwkv_http_requests_total{method="POST",route="/v1/chat/completions",'
                   'status="200"}', "rwkv_prompt_tokens_total", "rwkv_generated_tokens_total",
                   "rwkv_prefill_tokens_total", 'rwkv_time_to_first_token_seconds_bucket{le="+Inf"}',
                   'rwkv_time_per_output_token_seconds_bucket{le="+Inf"}', "rwkv_queue_length",
                   "rwkv_scoring_jobs",
                   "rwkv_capacity", "rwkv_active_slots", "rwkv_prefix_cache_bytes",
                   "rwkv_prefix_cache_misses_total", "rwkv_prefix_cache_entries"):
        assert f"\n{series} " in text, series
    assert f"\nrwkv_prefix_cache_hits_total {float(h['hits'])}\n" in text
    assert f"\nrwkv_prefill_tokens_total {float(h['prefilled_tokens'])}\n" in text
    assert f"\nrwkv_prefill_calls_total {float(h['prefill_calls'])}\n" in text
    assert f"\nrwkv_prefill_later_tokens_total {float(h['later_tokens'])}\n" in text
    assert f"\nrwkv_prefill_boundaries_kept_total {float(h['boundaries_kept'])}\n" in text
    assert f"\nrwkv_prefill_warm_dropped_total {float(h['warm_dropped'])}\n" in text


def ttft_histogram(c: httpx.Client) -> tuple[float, float]:
    """(sum, count) of ``rwkv_time_to_first_token_seconds``."""
    fams = {f.name: f for f in text_string_to_metric_families(c.get("/metrics").text)}
    got = {s.name: s.value for s in fams["rwkv_time_to_first_token_seconds"].samples}
    return (got["rwkv_time_to_first_token_seconds_sum"],
            got["rwkv_time_to_first_token_seconds_count"])


def test_time_to_first_token_counts_an_echoed_prompts_scoring(on, monkeypatch):
    """Time to first token runs from the request's arrival: a completion with echo and
    logprobs has its prompt scored before its task is queued, and its client waits for that
    too. It counted from ``add_task``: a 3,000-token prompt whose client waited 5.6 s for its
    first event was observed at 0.06 s on the tiny model."""
    from server.scheduler.scoring import ScoreJob

    step = ScoreJob.step

    def slow_step(self, *args):  # (on the scheduler's thread: a long prompt's scoring)
        time.sleep(0.5)
        return step(self, *args)

    monkeypatch.setattr(ScoreJob, "step", slow_step)
    before = ttft_histogram(on)
    r = on.post("/v1/completions", json={"model": "rwkv-7", "prompt": "score me first",
                                         "max_tokens": 2, "temperature": 0, "echo": True,
                                         "logprobs": 1})
    assert r.status_code == 200, r.text
    total, count = (a - b for a, b in zip(ttft_histogram(on), before))
    assert count == 1 and total >= 0.5, (total, count)


def test_metrics_are_documented_as_text(on):
    """The served reply is Prometheus text, and the OpenAPI document says so (it said JSON:
    a schema-driven client parsed it as such; a fuzzing helper, session 49)."""
    r = on.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain"), r.headers
    content = on.get("/openapi.json").json()["paths"]["/metrics"]["get"]["responses"]["200"][
        "content"]
    assert list(content) == ["text/plain"], content


def test_metrics_method_label_is_bounded(on):
    """Made-up HTTP methods count under method="other": a label value per method would let any
    client add series to /metrics without limit."""
    for i in range(3):
        assert on.request(f"BOGUS{i}", "/v1/models").status_code == 405
    families = {f.name: f for f in text_string_to_metric_families(on.get("/metrics").text)}
    methods = {s.labels["method"] for s in families["rwkv_http_requests"].samples}
    assert "other" in methods and not any(m.startswith("BOGUS") for m in methods), methods


def test_head_requests_count_under_their_route(on):
    """HEAD is served as GET (``HeadMiddleware``, on a copy of the scope): /metrics counted
    every HEAD under route="other", as if no route had served it (uptime probes of /health;
    session 54's review)."""
    def requests() -> dict:
        fams = {f.name: f for f in text_string_to_metric_families(on.get("/metrics").text)}
        return {(s.labels["route"], s.labels["method"], s.labels["status"]): s.value
                for s in fams["rwkv_http_requests"].samples if s.name.endswith("_total")}

    before = requests()
    assert on.head("/health").status_code == 200
    assert on.head("/v1/models").status_code == 200
    after = requests()
    for route in ("/health", "/v1/models"):
        key = (route, "HEAD", "200")
        assert after.get(key, 0) == before.get(key, 0) + 1, after
    assert after.get(("other", "HEAD", "200"), 0) == before.get(("other", "HEAD", "200"), 0)


def test_metrics_follow_the_api_key_rule(tiny_model_path, tmp_path):
    settings = make_settings(tiny_model_path, tmp_path, api_key="s3cret")
    with LiveServer(settings) as srv:
        assert httpx.get(srv.url + "/metrics").status_code == 401
        ok = httpx.get(srv.url + "/metrics", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and "rwkv_capacity" in ok.text
        assert "prefix_cache" not in httpx.get(srv.url + "/health").json()  # needs the key
        h = httpx.get(srv.url + "/health", headers={"Authorization": "Bearer s3cret"}).json()
        assert h["prefix_cache"]["enabled"] is True
        # a 401 given before routing counts under the route the request named (it was
        # "other", a QA report, session 26); an unknown path stays "other"
        assert httpx.get(srv.url + "/v1/tasks/TASK_x/status").status_code == 401
        assert httpx.get(srv.url + "/no/such/path").status_code == 401
        text = httpx.get(srv.url + "/metrics", headers={"Authorization": "Bearer s3cret"}).text
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        got = {(s.labels["route"], s.labels["status"]): s.value
               for s in fams["rwkv_http_requests"].samples if s.name.endswith("_total")}
        assert got[("/v1/tasks/{task_id}/status", "401")] == 1
        assert got[("/metrics", "401")] == 1 and got[("other", "401")] == 1, got



def test_a_warm_up_refused_for_its_ids_is_dropped_quietly(tiny_model_path, tmp_path):
    """A checkpoint whose vocabulary is smaller than the tokenizer's: a reply of ids below V
    can re-encode, as the next turn's history, to ids past it, which ``warm_prefix`` refuses
    (ValueError; test_prefix_cache). The route drops that warm-up without the "on_finish
    failed" warning each such turn logged (a helper's review, session 61). Here the refusal is
    injected: a chat prompt's own template words are past such a small V."""
    from loguru import logger

    settings = make_settings(tiny_model_path, tmp_path, state_cache_mb=8)
    msgs = [{"role": "system", "content": "Refused warm-up system prompt. " * 3},
            {"role": "user", "content": "Say something."}]
    lines: list[str] = []
    with LiveServer(settings) as srv, httpx.Client(base_url=srv.url, timeout=120) as c:
        # (after the start: it sets up the logging anew)
        sink = logger.add(lines.append, level="WARNING", format="{message}")
        try:
            calls = []

            def refuse(origin, tokens):
                calls.append(origin)
                raise ValueError("token ids must be in 0..511")
            srv.runtime.scheduler.warm_prefix = refuse
            body = {"model": "rwkv-7", "messages": msgs, "max_tokens": 4, **GREEDY}
            for stream in (False, True):
                r = c.post("/v1/chat/completions", json={**body, "stream": stream})
                assert r.status_code == 200, r.text
            deadline = time.monotonic() + 10
            while len(calls) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)  # (a warning follows the call at once)
        finally:
            logger.remove(sink)
    assert calls == ["", ""] and not [m for m in lines if "on_finish" in m], (calls, lines)
