"""Found by a review (session 53): a task fed from an off-grid history (non-canonical: computed
from its own state, cut where the server without the cache cuts) whose feed happened to end on
the grid (a multiple of ``align``) looked canonical to the next round: nothing marked its state
as not what a prefill from its origin computes."""

import torch

from server.scheduler import DynamicScheduler
from server.scheduler.prefix_cache import PrefixCache
from server.task.task import Task


def same_state(a, b) -> bool:
    return torch.equal(a.wkv, b.wkv) and torch.equal(a.shift, b.shift)


def _run(loader, cache):
    """A: 40 tokens, max_tokens 0 (history 39: off the grid). B = A continued with 25 tokens,
    max_tokens 0 (fed from 39: its history ends at 64, on the grid). C = B continued with 40
    tokens (decodes). D: a fresh request of C's whole text. Returns (C, D, scheduler)."""
    g = torch.Generator().manual_seed(53)
    p1, p2, p3 = (torch.randint(1, 60000, (n,), generator=g).tolist() for n in (40, 25, 40))
    sched = DynamicScheduler(loader, max_batch_size=4, buffer_size=4, prefix_cache=cache)
    seeded = dict(max_tokens=8, temperature=1.0, top_p=1.0, top_k=0, seed=39)
    task = Task(list(p1), max_tokens=0)
    task.cache_origin = ""
    sched.add_task(task)
    sched.run()
    assert task.wait(60) and len(task.history) == 39
    task.continue_gen(list(p2), max_tokens=0)
    sched.add_task(task)
    sched.run()
    assert task.wait(60) and len(task.history) == 64  # on the grid, fed from 39: off it
    task.continue_gen(list(p3), **seeded)
    sched.add_task(task)
    sched.run()
    assert task.wait(60)
    fresh = Task(p1 + p2 + p3, **seeded)
    fresh.cache_origin = ""
    sched.add_task(fresh)
    sched.run()
    assert fresh.wait(60)
    return task, fresh, sched


def test_a_fresh_request_never_resumes_a_state_fed_off_the_grid(tiny_loader):
    """Before the fix C stored its whole prompt (state and logits, computed with a cut at 39)
    under the zero state's origin, and D resumed it (no token prefilled): D's bits were not
    those of D without the cache."""
    plain_c, plain, _ = _run(tiny_loader, None)
    cached_c, cached, sched = _run(tiny_loader, PrefixCache(64 << 20))
    assert same_state(cached_c.state, plain_c.state) and cached_c.output == plain_c.output
    assert cached.output == plain.output  # (seed 39: its 5th token parted before the fix)
    assert same_state(cached.state, plain.state), (
        f"fresh request's state differs; prefilled {sched.prefiller.prefilled_tokens} tokens "
        f"(A 39 + B 25 + C 41 = 105: the fresh one resumed C's entry)")


def test_a_continue_of_a_state_fed_off_the_grid_never_jumps(tiny_loader):
    """The other way: the fresh request first (its whole prompt cached), then C: before the fix
    C (history 64, taken for canonical) resumed the fresh request's entry instead of computing
    from its own state, as it does without the cache."""
    def run(cache):
        g = torch.Generator().manual_seed(53)
        p1, p2, p3 = (torch.randint(1, 60000, (n,), generator=g).tolist() for n in (40, 25, 40))
        sched = DynamicScheduler(tiny_loader, max_batch_size=4, buffer_size=4, prefix_cache=cache)
        seeded = dict(max_tokens=8, temperature=1.0, top_p=1.0, top_k=0, seed=39)
        fresh = Task(p1 + p2 + p3, **seeded)
        task = Task(list(p1), max_tokens=0)
        for t in (fresh, task):
            t.cache_origin = ""
            sched.add_task(t)
            sched.run()
        task.continue_gen(list(p2), max_tokens=0)
        sched.add_task(task)
        sched.run()
        task.continue_gen(list(p3), **seeded)
        sched.add_task(task)
        sched.run()
        assert task.wait(60)
        return task

    plain, cached = run(None), run(PrefixCache(64 << 20))
    assert cached.output == plain.output and same_state(cached.state, plain.state)
