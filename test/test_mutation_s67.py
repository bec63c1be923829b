"""Session 67's mutation review of sessions 63-66's code: behaviours that no test could fail
before (each test here fails on the mutant named in its docstring and passes on the code).
CPU only: the decode graphs' bookkeeping runs with a stand-in capture, as
test_model_forward's ``test_decode_graphs_logits_buffers_are_dropped_with_their_last_graph``
does."""

import json
from collections import OrderedDict

import pytest
import torch

from server.model.cuda_graph import CAPTURE_LOCK
from server.model.state import State
from server.scheduler import copyback
from server.scheduler.copyback import Staging, gather_rows, row_bytes


# ---- GraphedDecode's graph and logits-buffer bookkeeping (a stand-in capture) ------------
def _graphed(max_graphs=2):
    """``model_cases.stand_in_graphs``' graphs and stepping function."""
    from model_cases import stand_in_graphs

    gd, decode, _ = stand_in_graphs(max_graphs)
    return gd, decode


def test_a_replayed_graph_is_the_last_evicted():
    """Graphs are dropped least recently *used* first: a graph replayed since stays, the one
    left idle goes (an engine's current capacity keeps its graph while others come and go).
    Mutant killed: ``move_to_end`` dropped (first captured, first evicted)."""
    gd, decode = _graphed(max_graphs=2)
    decode("a", 2)
    decode("b", 1)
    decode("a", 2)  # replayed: now the most recently used
    decode("c", 1)  # evicts b, not a
    captures = len(gd.captures)
    decode("a", 2)
    assert len(gd.captures) == captures  # a's graph was kept: no capture again
    decode("b", 1)
    assert len(gd.captures) == captures + 1  # b's was the one dropped


def test_a_graph_evicted_by_another_thread_after_its_lookup_still_replays():
    """Another thread's capture (two engines on one model) can evict a graph between this
    call's lookup and its ``move_to_end``: the call replays the graph it holds and returns its
    logits instead of raising KeyError. Mutant killed: the ``except KeyError`` dropped."""
    gd, decode = _graphed(max_graphs=2)
    first = decode("a", 2)

    class EvictedAfterGet(OrderedDict):
        def get(self, key, default=None):
            g = super().get(key, default)
            self.pop(key, None)  # (the other thread's eviction, right after the lookup)
            return g

    gd.graphs = EvictedAfterGet(gd.graphs)
    again = decode("a", 2)
    assert again.data_ptr() == first.data_ptr() and again.shape == (2, 8)


def test_eviction_and_pruning_run_under_the_capture_lock():
    """The LRU eviction and the logits buffers' pruning run under CAPTURE_LOCK, as captures do
    (another thread's capture changes ``graphs`` and ``_outs`` meanwhile otherwise; session
    64's review). Mutant killed: both moved out of the ``with CAPTURE_LOCK`` block."""
    gd, decode = _graphed(max_graphs=1)
    held = []
    real_prune = gd._prune

    def prune():
        held.append(("prune", CAPTURE_LOCK.locked()))
        real_prune()

    class Recording(OrderedDict):
        def popitem(self, last=True):
            held.append(("evict", CAPTURE_LOCK.locked()))
            return super().popitem(last)

    gd._prune = prune
    gd.graphs = Recording()
    decode("a", 2)
    decode("b", 1)  # evicts a's graph, prunes its buffer
    assert ("evict", True) in held and held.count(("prune", True)) == 2, held
    assert all(locked for _, locked in held), held
    assert len(gd._outs) == 1


def test_clear_drops_the_logits_buffers_with_the_graphs():
    """``clear()`` (the engine's release: its slot state and graphs freed) drops the logits
    buffers too: one is [rows, vocabulary] fp32 (64 MiB at 256 rows of 65,536), held for good
    otherwise. Mutant killed: ``self._outs.clear()`` dropped from ``clear``."""
    gd, decode = _graphed()
    decode("a", 4)
    decode("b", 2)
    assert len(gd._outs) == 2
    gd.clear()
    assert gd.graphs == {} and gd._outs == {} and gd.pool is None


def test_a_logits_buffer_made_in_inference_mode_is_writable_outside_it():
    """The shared logits buffer is an ordinary tensor whichever mode made it: a capture
    outside inference mode writes a buffer that a capture in inference mode made (one engine
    steps under ``torch.inference_mode``, another not). Mutant killed: the buffer made without
    ``inference_mode(False)`` ("Inplace update to inference tensor outside InferenceMode")."""
    gd, _ = _graphed()
    st = State(torch.zeros(1, 2, 4, 3), torch.zeros(1, 4, 1, 2, 2))
    with torch.inference_mode():
        buf = gd._out(st, 2, 8)
    buf.fill_(1.0)  # (outside inference mode)
    assert gd._out(st, 4, 8)[:2].sum().item() == 2 * 8  # one buffer: its first rows written


# ---- the copy-back's staging buffer ------------------------------------------------------
def _rows(batch=8):
    g = torch.Generator().manual_seed(0)
    state = State(torch.randn(2, 2, batch, 8, generator=g).half(),
                  torch.randn(2, batch, 2, 4, 4, generator=g))
    return state, torch.randn(batch, 16, generator=g), torch.arange(batch) * 7


def test_the_staging_buffer_is_allocated_once_at_its_minimum_and_reused():
    """The staging buffer (pinned on CUDA: allocating it is slow, and done under
    CAPTURE_LOCK) is allocated at its ``min_bytes`` (the copy-back's group size, set by its
    budget) at first use, however small that group, and reused for every group that fits:
    also for one of exactly its size. Mutants killed: ``min_bytes`` ignored (sized to the
    first group, grown for each larger one) and ``>=`` for ``>`` (a new buffer for a group
    that fits exactly)."""
    state, penalties, counter = _rows(16)
    rb = row_bytes(state, penalties, counter)
    cb = copyback.CopyBack(torch.device("cpu"), group_bytes=64 * rb)
    cb.staging = Staging(1, pin=False)
    cb.budget = 16 * rb  # (RWKV_COPYBACK_MB: groups, and the buffer, of at most 16 rows)
    staging = cb.staging
    copyback.to_host(gather_rows(state, penalties, counter, [3]), None, staging)
    buf = staging.buf
    assert staging.nbytes == 16 * rb + 4 * copyback._ALIGN
    # (a whole group, 16 rows, fits too: its 4 tensors' alignment padding is in the minimum)
    for slots in ([0, 1, 2, 3, 4, 5, 6, 7], [6, 2], list(range(16)), [5]):
        states, _, counters = copyback.to_host(
            gather_rows(state, penalties, counter, slots), None, staging)
        assert staging.buf is buf and counters == [7 * s for s in slots]
        assert torch.equal(states[-1].wkv, state.select([slots[-1]]).wkv)
    exact = Staging(1, pin=False)  # sized by its first copy: the same copy again fits exactly
    copyback.to_host(gather_rows(state, penalties, counter, [0, 1]), None, exact)
    first = exact.buf
    copyback.to_host(gather_rows(state, penalties, counter, [4, 5]), None, exact)
    assert exact.buf is first


# ---- ids and prompts ----------------------------------------------------------------------
def test_task_ids_are_ascii_only():
    """A task id is 1-128 ASCII letters, digits, '_', '.', '-' (it appears in URL paths and
    the database as is): letters or digits of other scripts are refused as a space is.
    Mutant killed: ``[A-Za-z0-9_.\\-]`` widened to ``[\\w.\\-]`` (Unicode word characters)."""
    from server.task.policy import check_id

    for bad in ("tâche", "任务", "TASK_١٢", "ＴＡＳＫ", "naïve.tpl"):
        with pytest.raises(ValueError, match="task id"):
            check_id(bad)
    for good in ("TASK_0a9f", "_tpl-v1.2", "TMP_x"):
        check_id(good)


def test_new_task_refuses_a_bytearray_prompt(tiny_loader):
    """Bytes of any kind are no prompt for ``new_task``: a bytearray's items are ints, taken
    as token ids (b"hi" as ids 104, 105) before session 66. Mutant killed: ``bytearray``
    dropped from the scheduler's check (bytes and memoryview are tested in test_scheduler)."""
    from server.scheduler import DynamicScheduler

    scheduler = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4)
    with pytest.raises(TypeError, match="prompt must be text or a list of token ids"):
        scheduler.new_task(bytearray(b"hi"), max_tokens=2)
    assert not scheduler.waiting


# ---- strict JSON on the OpenAI routes and /health ----------------------------------------
@pytest.fixture(scope="module")
def client(tiny_model_path, tmp_path_factory):
    from fastapi.testclient import TestClient

    from server.api.app import create_app
    from server.config import Settings

    settings = Settings(model_path=tiny_model_path, demo=None, device="cpu", api_key=None,
                        task_db_path=str(tmp_path_factory.mktemp("s67") / "t.db"))
    with TestClient(create_app(settings)) as c:
        yield c


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"non-JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("route", ["chat", "completions"])
def test_openai_bodies_are_strict_json_with_a_non_finite_log_probability(
        client, monkeypatch, route):
    """A non-finite number in a finished reply (a log probability of -inf: a row's logits
    partly infinite while the drawn token's is finite) is written as a string: ``NaN`` and
    ``-Infinity`` are no JSON (strict parsers refused them), and Starlette's own writer
    answered 500 "Out of range float values" (session 66's QA). Mutants killed: the reply
    built with ``JSONResponse`` instead of ``SafeJSONResponse`` (chat, completions)."""
    from server.api.routes import openai

    name = "chat_body" if route == "chat" else "completion_body"
    real = getattr(openai, name)

    def with_inf(*args):
        body = real(*args)
        body["choices"][0]["logprobs"] = {"token_logprobs": [float("-inf")]}
        return body

    monkeypatch.setattr(openai, name, with_inf)
    if route == "chat":
        r = client.post("/v1/chat/completions", json={
            "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
    else:
        r = client.post("/v1/completions", json={"max_tokens": 2, "prompt": "hi"})
    assert r.status_code == 200, r.text
    assert _strict(r.text)["choices"][0]["logprobs"] == {"token_logprobs": ["-inf"]}


def test_health_is_utf8_json_whatever_the_store_reports(client, monkeypatch):
    """/health answers valid UTF-8 JSON when what it reports holds a lone surrogate (an
    OS error naming a file whose name is not UTF-8 decodes to one): Starlette's own writer
    raised UnicodeEncodeError, a 500 on the liveness probe. Mutant killed: /health without
    ``response_class=SafeJSONResponse``."""
    manager = client.app.state.runtime.manager
    status = manager.store_status()
    monkeypatch.setattr(manager, "store_status", lambda: {
        **status, "ok": False, "error": "OSError: cannot write /data/caf\udce9/tasks.db"})
    r = client.get("/health")
    assert r.status_code == 200
    body = _strict(r.content.decode("utf-8"))
    assert body["status"] == "degraded" and body["task_store"]["error"].startswith("OSError")


# ---- a task whose slot's state is lost ----------------------------------------------------
def test_a_task_failed_mid_prefill_leaves_no_prefill_plan(tiny_loader, monkeypatch):
    """A fault in a prefill pass fails the tasks in slots (``_fail_all`` -> ``_take_lost``):
    their prefill plans go with them (``Prefiller.forget``), so a task resubmitted before the
    next prefill step is planned anew rather than from the lost pass's plan (session 67's
    review; nothing else dropped it before that step). Mutant killed: ``forget`` dropped."""
    from server.scheduler import DynamicScheduler
    from server.scheduler.prefix_cache import PrefixCache
    from server.task.task import Task

    sched = DynamicScheduler(tiny_loader, max_batch_size=2, buffer_size=4,
                             prefix_cache=PrefixCache(64 << 20, "cpu"))
    task = Task(tiny_loader.encode("User: " + "a long question " * 20 + "\n\nAssistant:"),
                max_tokens=2, temperature=0.0)
    task.cache_origin = ""  # (in the prefix cache: its prefill is planned, as the API's are)
    sched.add_task(task)

    def fault(*a, **k):
        raise RuntimeError("injected prefill fault")
    monkeypatch.setattr(sched.engine, "prefill", fault)
    sched.step()
    assert task.finish_reason == "error" and "injected prefill fault" in task.error
    assert id(task) not in sched.prefiller._seqs
    monkeypatch.undo()
    task.continue_gen()  # (its round failed: run it again, from its admitted state)
    sched.add_task(task)
    sched.run()
    assert task.finish_reason == "length" and len(task.round_tokens()) == 2
