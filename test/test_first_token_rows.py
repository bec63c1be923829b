"""A pulse whose rows take their first token from the prompt's pass (``engine.prefill`` with
``first``: the "merged" first pulse) gives every row the tokens, counters and state of a plain
decode of the prompt's last token, whether the engine addresses those rows through a slice
(consecutive slots: no index upload, 83145c3) or an index tensor. Most engine tests use
consecutive slots; here ``rows_on`` is also forced to return index tensors, and the rows mix
first-token rows with decoding rows and free slots (a helper's review, session 61: a mutant
that reversed every index tensor failed only one existing test)."""

import pytest
import torch

from server.bench.common import DummyTask
from server.scheduler import engine as engine_module
from server.scheduler.engine import BatchEngine


def run(loader, monkeypatch, cap, live, first, plan, *, index=False, compact=None, stop=None):
    """Load ``live`` slots (capacity ``cap``), prefill each prompt (a row of ``first``: all of
    it, its first token from that pass; else all but its last token, decoded by the pulse),
    optionally compact to ``compact``, then run pulses of ``plan`` steps. Returns the tokens
    by slot, the sampling counters and the WKV state."""
    if index:
        monkeypatch.setattr(engine_module, "rows_on",
                            lambda idx, dev: torch.tensor(list(idx), dtype=torch.long))
    e = BatchEngine(loader.model)
    prompts = {s: [5 + s + 3 * j for j in range(4 + 3 * s)] for s in range(cap)}
    e.resize(cap, [])
    e.load(live, [DummyTask(temperature=0.0 if s % 3 == 0 else 1.0, seed=7 + s, top_k=0)
                  for s in live])
    for s in live:
        p = prompts[s]
        e.prefill([s], [p if s in first else p[:-1]], first={s} if s in first else ())
    e.start(live, [prompts[s][-1] for s in live], [3 + s % 4 for s in live])
    if compact is not None:
        e.resize(cap, compact)
    out: dict = {}
    for n in plan:
        if stop is not None:
            e.request_stop(stop)
        r = e.pulse(n)
        for s in range(cap):
            out.setdefault(s, []).extend(r.tokens[s])
    return out, e.samp.counter.clone(), e.state.wkv.clone()


@pytest.mark.parametrize("cap,live,first", [
    (4, [0, 1, 2, 3], {0, 2}), (4, [0, 1, 2, 3], {1, 2}), (4, [0, 2, 3], {3}),
    (4, [1, 3], {1, 3}), (4, [0, 1, 2, 3], {0, 1, 2, 3}), (8, [0, 2, 4, 5, 6], {2, 6}),
    (8, [0, 2, 4, 5, 6], {4, 5, 6})])
def test_first_token_rows_equal_a_decode_through_slices_and_indexes(tiny_loader, monkeypatch,
                                                                     cap, live, first):
    plan = [1, 2, 4]  # (pulses of several lengths: rows end inside them)
    want = run(tiny_loader, monkeypatch, cap, live, set(), plan)
    sliced = run(tiny_loader, monkeypatch, cap, live, first, plan)
    indexed = run(tiny_loader, monkeypatch, cap, live, first, plan, index=True)
    for got in (sliced, indexed):
        assert got[0] == want[0] and torch.equal(got[1], want[1])
        assert torch.allclose(got[2], want[2], atol=1e-4)
    assert torch.equal(sliced[2], indexed[2])


@pytest.mark.parametrize("live,first,keep", [([0, 1, 2, 3], {1, 3}, [3, 1, 0]),
                                             ([1, 2, 3], {1, 2}, [2, 1])])
def test_first_token_rows_moved_by_a_compaction(tiny_loader, monkeypatch, live, first, keep):
    """A resize between the prompt's pass and the pulse reorders the slots."""
    want = run(tiny_loader, monkeypatch, 4, live, set(), [5], compact=keep)
    for index in (False, True):
        got = run(tiny_loader, monkeypatch, 4, live, first, [5], compact=keep, index=index)
        assert got[0] == want[0]


@pytest.mark.parametrize("stop", [1, 2])
def test_a_stop_on_a_first_token_row(tiny_loader, monkeypatch, stop):
    """A stop asked for before the pulse: the same tokens through a slice or an index."""
    sliced = run(tiny_loader, monkeypatch, 4, [0, 1, 2, 3], {1, 2}, [4], stop=stop)
    indexed = run(tiny_loader, monkeypatch, 4, [0, 1, 2, 3], {1, 2}, [4], stop=stop, index=True)
    assert sliced[0] == indexed[0]
