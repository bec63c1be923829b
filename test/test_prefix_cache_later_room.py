"""Boundaries past LATER_MAX in a pass whose states are not kept (the GPU's reality, emulated on
the CPU as in test_prefix_cache_exact.py: a pass of four or more rows nudges its WKV state, and
``pass_keeps_bits(rows) = rows < 4``). Five chats send their next turn together: four boundary
jobs wait, and the fifth's feed stopped at its boundary for want of room (one more model call
before every first token of the burst) though that pass's states are not kept: the call kept
nothing. It now feeds on (one call); every kept state is still a lone prefill's bits."""

from array import array

import torch
from model_cases import emulate_gpu_batched_rounding

from server.scheduler import DynamicScheduler
from server.scheduler.later import _Later
from server.scheduler.prefix_cache import PrefixCache, prefix_hashes
from server.task.task import Task

TT = 261
SYSTEM = [300 + (i * 7) % 100 for i in range(70)]


def _msg(c, t, n):
    return [20000 + (c * 31 + t * 7 + i) % 100 for i in range(n)]


def _render(turns):
    out = list(SYSTEM)
    for t in turns:
        out += [TT] + t
    return out + [TT, 5585, 41]


def _burst(loader, k):
    convs = [[_msg(c, 0, 40), _msg(c, 1, 50), _msg(c, 2, 30 + c)] for c in range(k)]
    cache = PrefixCache(256 << 20)
    sched = DynamicScheduler(loader, max_batch_size=16, buffer_size=4, prefix_cache=cache,
                             prefill_chunk=4096)
    for c in range(k):  # each chat's first turn, alone
        t = Task(_render(convs[c][:1]), max_tokens=0)
        t.cache_origin = ""
        sched.add_task(t)
        sched.run()
    pf = sched.prefiller
    calls = pf.prefill_calls
    for c in range(k):  # their second turns together
        t = Task(_render(convs[c]), max_tokens=1, temperature=0.0)
        t.cache_origin = ""
        sched.add_task(t)
    sched.run()
    return pf.prefill_calls - calls, cache


def test_no_stop_for_room_in_a_pass_whose_states_are_not_kept(tiny_loader, monkeypatch):
    model = tiny_loader.model
    emulate_gpu_batched_rounding(model, monkeypatch)
    calls, cache = _burst(tiny_loader, 5)
    assert calls == 1
    for e in cache._lru.values():  # what is kept is a lone uncached prefill's bits
        want = model.new_state(1)
        model.prefill([list(e.tokens)], want, logits=False)
        assert torch.equal(want.wkv, e.state.wkv) and torch.equal(want.shift, e.state.shift)


def test_a_pass_that_keeps_its_bits_still_stops_for_room(tiny_loader):
    calls, _ = _burst(tiny_loader, 5)  # (the CPU: every pass keeps its rows' bits)
    assert calls == 2  # the fifth stops at its boundary and keeps that state


def _boundary_kept(cache, toks, align) -> bool:
    """Whether ``cache`` holds the state at ``toks``' last turn boundary (cut to ``align``)."""
    last = max(i + 1 for i, x in enumerate(toks[:-1]) if x == TT)
    last -= last % align
    return cache.contains(cache.key("", prefix_hashes(array("I", toks)), last))


def test_a_job_past_later_max_is_not_added_and_none_waiting_is_dropped(tiny_loader,
                                                                       monkeypatch):
    """The five-chat burst: the four chats planned with a later job's room keep their
    boundaries; the fifth's (fed on without room) is the one lost. Before, the deque of jobs
    dropped the oldest waiting one (a review, session 50)."""
    emulate_gpu_batched_rounding(tiny_loader.model, monkeypatch)
    calls, cache = _burst(tiny_loader, 5)
    assert calls == 1
    kept = [_boundary_kept(cache, _render([_msg(c, 0, 40), _msg(c, 1, 50), _msg(c, 2, 30 + c)]),
                           32) for c in range(5)]
    assert kept == [True, True, True, True, False]


def test_a_round_replanned_into_one_that_keeps_its_bits_stops_for_room_again(tiny_loader,
                                                                              monkeypatch):
    """Four rows (not kept) re-planned without room stops became three (kept: the budget no
    longer reached the fourth): the chats fed on past their boundaries without a job's room
    lost those boundaries in a pass whose states are kept. The three are planned once more with
    their stops (a review, session 50)."""
    model = tiny_loader.model
    emulate_gpu_batched_rounding(model, monkeypatch)
    k = 4
    convs = [[_msg(c, 0, 40), _msg(c, 1, 50), _msg(c, 2, 30 + c)] for c in range(k)]
    cache = PrefixCache(256 << 20)
    sched = DynamicScheduler(tiny_loader, max_batch_size=16, buffer_size=4, prefix_cache=cache,
                             prefill_chunk=330)
    for c in range(k):
        t = Task(_render(convs[c][:1]), max_tokens=0)
        t.cache_origin = ""
        sched.add_task(t)
        sched.run()
    pf = sched.prefiller
    done = Task([1, 2], max_tokens=0)  # a finished task: its placeholder jobs do not wait
    for _ in range(2):  # two jobs already waiting: room for two
        pf._later.append(_Later("", array("I"), array("I"), 0, [], None, done))
    for c in range(k):
        t = Task(_render(convs[c]), max_tokens=1, temperature=0.0)
        t.cache_origin = ""
        sched.add_task(t)
    sched.run()
    assert all(_boundary_kept(cache, _render(convs[c]), pf.align) for c in range(k))
    for e in cache._lru.values():  # what is kept is a lone uncached prefill's bits
        want = model.new_state(1)
        model.prefill([list(e.tokens)], want, logits=False)
        assert torch.equal(want.wkv, e.state.wkv) and torch.equal(want.shift, e.state.shift)
