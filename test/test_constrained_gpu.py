"""Constrained decoding on CUDA (server/scheduler/guide.py): the masks uploaded and expanded on
the device, rows taking their first token from a prompt's kept logits, the decode graph's
borrowed logits; replies are JSON matching the schema, every token allowed at its step, and the
free rows beside them reply as alone."""

import json

import pytest
import torch
from constrained_cases import SCHEMA, check_schema_reply, replays

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
