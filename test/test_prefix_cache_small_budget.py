"""A step budget (``prefill_chunk``) below ``align`` (32 on the CPU) cuts feeds off the align
grid (``Prefiller._cut``: progress before exactness). The states such a prompt computes are not
a lone pass's bits and are no longer kept: every kept state is, and a later request sharing
the prefix gives what it gives without the cache. (The server's config refuses such a budget;
an in-process DynamicScheduler takes any budget >= 1.) Before the fix the prompt's states at
64 and 96 tokens were kept with other bits (~3e-6) and the next request's seeded reply parted."""

from array import array

import torch

from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache, prefix_hashes
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


def test_a_task_with_its_own_state_does_not_jump_at_admission_either(tiny_loader):
    """With a step budget below align, ``run`` fed as without the cache, but a task holding a
    state of its own (as a template's does) still jumped to a cached prefix at admission
    (``find_at_admission``): the rest was then cut at the jump + k * budget instead of
    k * budget, other bits than without the cache (a review, session 50)."""
    model = tiny_loader.model
    cache = PrefixCache(64 << 20)
    st = model.new_state(1)  # an exact entry: the lone pass's state after 64 tokens
    model.prefill([P2[:64]], st, logits=False)
    cache.insert(cache.key("", prefix_hashes(array("I", P2)), 64), array("I", P2[:64]), st)
    outs = []
    for c in (cache, None):
        s = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=4, prefix_cache=c,
                             prefill_chunk=20)
        q = Task(list(P2), max_tokens=8, temperature=1.0, top_p=0.9, top_k=0, seed=3)
        q.cache_origin = ""
        q.state = model.new_state(1)  # a state of its own
        s.add_task(q)
        s.run()
        outs.append(q)
    assert torch.equal(outs[0].state.wkv, outs[1].state.wkv)
    assert outs[0].output == outs[1].output


def _off_grid_task(model, prompt):
    """A task whose state holds 37 tokens (off the align grid of its origin, base 0), with
    ``prompt`` to feed: as a fork of a history cut off the grid, or a decoded state."""
    held = [500 + i for i in range(37)]
    t = Task(list(prompt), max_tokens=0)
    t.cache_origin = ""
    t.history = list(held)
    t.state = model.new_state(1)
    model.prefill([held], t.state, logits=False)
    return t, held


def test_an_off_grid_prompt_is_cut_from_its_own_start_whatever_runs_beside_it(tiny_loader):
    """A prompt longer than the step's budget fed into a state off its origin's grid was cut
    at the origin's base plus multiples of align (37 held, a budget of 45: a cut after 27
    tokens): other bits than its one pass, and where the cut fell depended on the budget the
    other prompts of the step left, so the same task ended with other bits beside other
    traffic, and with the prefix cache on than off (session 51's fuzz: forks of a decoded
    task). Now cut at multiples of align from its own start: the one pass's bits, alone or
    beside another prompt, with the cache or without."""
    model = tiny_loader.model
    prompt = [900 + (i * 13) % 400 for i in range(110)]
    for cache in (None, PrefixCache(64 << 20)):
        for beside in (False, True):
            s = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=4,
                                 prefix_cache=cache, prefill_chunk=45)
            if beside:  # a prompt of its own takes part of the first steps' budget
                other = Task([700 + i for i in range(20)], max_tokens=0)
                other.cache_origin = ""
                s.add_task(other)
            t, held = _off_grid_task(model, prompt)
            s.add_task(t)
            s.run()
            fed = t.history[len(held):]
            assert fed == prompt[:len(fed)] and len(fed) >= len(prompt) - 1
            want = model.new_state(1)
            model.prefill([held], want, logits=False)
            model.prefill([fed], want, logits=False)
            assert torch.equal(t.state.wkv, want.wkv) and torch.equal(t.state.shift, want.shift), \
                (cache is not None, beside)
