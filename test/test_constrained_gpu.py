"""Constrained decoding on CUDA (server/scheduler/guide.py): the masks uploaded and expanded on
the device, rows taking their first token from a prompt's kept logits, the decode graph's
borrowed logits; replies are JSON matching the schema, every token allowed at its step, and the
free rows beside them reply as alone."""

import json

import pytest
import torch
from constrained_cases import SCHEMA, check_schema_reply, record_fed_runs, replays

from server.model.loader import RWKV070ModelLoader
from server.scheduler import DynamicScheduler
from server.task.constraint import Constraint, json_grammar

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def test_constrained_rows_on_cuda(tiny_model_path):
    loader = RWKV070ModelLoader(tiny_model_path, device="cuda", dtype="fp16")
    grammar = json_grammar(SCHEMA)
    prompts = [[300 + 7 * i + j for j in range(9 + 5 * i)] for i in range(6)]
    alone = DynamicScheduler(loader, max_batch_size=1, buffer_size=4)
    solo = [alone.new_task(list(p), max_tokens=8, temperature=0.0) for p in prompts[:3]]
    alone.run()
    sched = DynamicScheduler(loader, max_batch_size=8, buffer_size=4)
    free = [sched.new_task(list(p), max_tokens=8, temperature=0.0) for p in prompts[:3]]
    rows = []
    for i, p in enumerate(prompts[3:]):
        task = sched.new_task(list(p), max_tokens=80, temperature=1.0, top_k=[0, 50, 0][i],
                              top_p=1.0, seed=i)
        task.constraint = Constraint(grammar, loader.tokenizer)
        rows.append(task)
    sched.run()
    assert [t.output for t in free] == [t.output for t in solo]
    for task in rows:
        assert task.finish_reason == "stop"
        check_schema_reply(json.loads(loader.decode(task.output)))
        assert replays(loader, grammar, task.output)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_a_model_on_the_second_gpu_replies_as_on_the_first(tiny_model_path):
    """``RWKV_DEVICE=cuda:1``: the scheduler's daemon thread, whose current device was cuda:0,
    recorded the pulse's CUDA events (end probe, constrained rows' tokens, copy-back) on cuda:0
    and its waits did not wait (session 47's review, argued); each thread that drives the model
    now makes its GPU current (``state.use_device``). Replies, free, constrained and resumed
    after a copy home, equal cuda:0's."""
    grammar = json_grammar(SCHEMA)

    def replies(device: str):
        loader = RWKV070ModelLoader(tiny_model_path, device=device, dtype="fp16")
        torch.cuda.set_device(0)  # (the test's thread: as a server's event loop leaves it)
        sched = DynamicScheduler(loader, max_batch_size=4, buffer_size=4)
        sched.engine.capture_graphs(4)
        torch.cuda.set_device(0)
        sched.start_daemon()
        try:  # (constraints given to new_task: the running daemon may start a task at once)
            tasks = [sched.new_task([300 + i, 301, 302], max_tokens=24, temperature=1.0,
                                    top_k=0, top_p=1.0, seed=i,
                                    constraint=Constraint(grammar, loader.tokenizer) if i else None)
                     for i in range(3)]
            sched.run()
            again = tasks[0]  # its state came home: a second round resumes it
            again.continue_gen(" and", max_tokens=8)
            sched.add_task(again)
            sched.run()
            return [t.output for t in tasks], loader
        finally:
            sched.shutdown()

    (first, _), (second, loader) = replies("cuda:0"), replies("cuda:1")
    assert second == first
    for out in second[1:]:
        assert replays(loader, grammar, out)


def test_fast_forward_on_cuda_is_the_same_whatever_the_pulses(tiny_model_path, monkeypatch):
    """Fast-forward (guide.py) on CUDA: the forced runs fed through the prefill (its graphs)
    and counted in the penalties and random streams on the device; a forced call's reply is a
    call the grammar allows, in fewer decode steps than tokens, and the replies and the runs
    fed are the same with pulses of 1, 3 or 16 steps (prefill and decode bits differ: a run
    fed at another point would show)."""
    from server.api.tools import ToolSpec, forced_call_grammar
    from server.scheduler import guide

    assert guide.FAST_ON_CUDA  # (on by default: guide.py)
    loader = RWKV070ModelLoader(tiny_model_path, device="cuda", dtype="fp16")
    params = {"type": "object", "required": ["city"], "additionalProperties": False,
              "properties": {"city": {"type": "string", "maxLength": 10}}}
    call = forced_call_grammar([ToolSpec("get_weather", "", params)],
                               {"type": "function", "function": {"name": "get_weather"}},
                               lead=">")
    fed = record_fed_runs(monkeypatch)
    seen = set()
    for buffer_size in (1, 3, 16):
        fed.clear()
        sched = DynamicScheduler(loader, max_batch_size=4, buffer_size=buffer_size)
        tasks = []
        for i in range(3):
            task = sched.new_task([300 + i, 301, 302], max_tokens=60, temperature=1.0,
                                  top_k=0, top_p=1.0, presence_penalty=0.5, seed=i)
            task.constraint = Constraint(call, loader.tokenizer)
            tasks.append(task)
        sched.run()
        steps = sum(p["steps"] for p in sched.pulses)
        assert steps < max(len(t.output) for t in tasks)
        for task in tasks:
            assert task.finish_reason == "stop" and replays(loader, call, task.output)
        seen.add((tuple(tuple(t.output) for t in tasks), tuple(sorted(fed))))
    assert len(seen) == 1 and next(iter(seen))[1]


def test_fast_forward_can_be_turned_off_on_cuda(tiny_model_path, monkeypatch):
    """``guide.FAST_ON_CUDA`` off: a forced call decodes step by step, a step a token."""
    from server.scheduler import guide

    monkeypatch.setattr(guide, "FAST_ON_CUDA", False)
    from server.api.tools import ToolSpec, forced_call_grammar

    loader = RWKV070ModelLoader(tiny_model_path, device="cuda", dtype="fp16")
    call = forced_call_grammar([ToolSpec("f", "", {"type": "object"})], "required", lead=">")
    sched = DynamicScheduler(loader, max_batch_size=2, buffer_size=8)
    task = sched.new_task([300, 301], max_tokens=40, temperature=0.0,
                          constraint=Constraint(call, loader.tokenizer))
    sched.run()
    assert sum(p["steps"] for p in sched.pulses) >= len(task.output)
