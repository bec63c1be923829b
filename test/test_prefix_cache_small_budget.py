"""A step budget (``prefill_chunk``) below ``align`` (32 on the CPU) cuts feeds off the align
grid (``Prefiller._cut``: progress before exactness). The states such a prompt computes are not
a lone pass's bits and are no longer kept: every kept state is, and a later request sharing
the prefix gives what it gives without the cache. (The server's config refuses such a budget;
an in-process DynamicScheduler takes any budget >= 1.) Before the fix the prompt's states at
64 and 96 tokens were kept with other bits (~3e-6) and the next request's seeded reply parted."""

import torch

from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task

SYSTEM = [300 + (i * 7) % 100 for i in range(90)]
P1 = SYSTEM + [261] + [20000 + i for i in range(30)] + [261, 5585, 41]
P2 = SYSTEM + [261] + [20050 + i for i in range(25)] + [261, 5585, 41]


def test_a_budget_below_align_keeps_no_off_grid_state(tiny_loader):
    model = tiny_loader.model
    cache = PrefixCache(64 << 20)
    sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=4, prefix_cache=cache,
                             prefill_chunk=20)
    outs = []
    for s in (sched, DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=4,
                                      prefill_chunk=20)):
        if s is sched:
            t = Task(list(P1), max_tokens=0)
            t.cache_origin = ""
            s.add_task(t)
            s.run()
            for e in cache._lru.values():
                want = model.new_state(1)
                model.prefill([list(e.tokens)], want, logits=False)
                assert torch.equal(want.wkv, e.state.wkv) and torch.equal(want.shift, e.state.shift)
        q = Task(list(P2), max_tokens=8, temperature=1.0, top_p=0.9, top_k=0, seed=3)
        q.cache_origin = ""
        s.add_task(q)
        s.run()
        outs.append(q)
    assert outs[0].output == outs[1].output
    assert torch.equal(outs[0].state.wkv, outs[1].state.wkv)
