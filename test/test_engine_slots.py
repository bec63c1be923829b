"""BatchEngine slot storage: views of high-water buffers, in-place compaction, free rows neutral,
reallocation past the high-water mark, and a pulse after compaction equal to one without."""

import pytest
import torch

from server.bench.common import DummyTask
from server.model.sampler import SamplingBatch
from server.scheduler.engine import BatchEngine


@pytest.fixture
def engine(tiny_loader):
    return BatchEngine(tiny_loader.model)


def fill(engine, slots):
    """Load distinct tasks (random states, varied sampling) into ``slots`` and make them live."""
    tasks = []
    for i in slots:
        t = DummyTask(temperature=0.5 + i / 10, top_k=i + 1, seed=100 + i, rng_counter=i)
        t.state = engine.model.new_state(1)
        t.state.wkv.normal_(generator=torch.Generator().manual_seed(i))
        t.state.shift.normal_(generator=torch.Generator().manual_seed(50 + i))
        t.penalties = torch.rand(engine.vocab_size, generator=torch.Generator().manual_seed(i))
        tasks.append(t)
    engine.load(slots, tasks)
    engine.start(slots, [10 + i for i in slots], [1000] * len(slots))


def rows(engine, slots):
    """Copies of everything the engine holds for ``slots``."""
    idx = torch.tensor(slots)
    st = engine.state.select(idx)
    sb = engine.samp.select(idx)
    return (st.wkv, st.shift, sb.penalties, sb.temperature, sb.top_k, sb.seed, sb.counter,
            engine.cur[idx], engine.live[idx])


def assert_rows_equal(a, b):
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_shrink_compacts_in_place_and_frees_rows(engine):
    engine.resize(8, [])
    ptr = engine.state.wkv.data_ptr()
    fill(engine, list(range(8)))
    keep = [1, 2, 6]
    before = rows(engine, keep)
    engine.resize(4, keep)
    assert engine.capacity == 4 and engine.state.batch_size == 4
    assert engine.state.wkv.data_ptr() == ptr  # same buffer: graphs keyed by it stay valid
    assert_rows_equal(rows(engine, [0, 1, 2]), before)
    free = SamplingBatch.empty(1, engine.vocab_size)
    assert not engine.live[3] and engine.cur[3] == 0
    for name in ("temperature", "top_k", "top_p", "penalties", "seed", "counter", "decay"):
        assert torch.equal(getattr(engine.samp, name)[3:4], getattr(free, name)), name
    engine.resize(8, [0, 1, 2])  # growing back within the buffer: rows 3..7 are free again
    assert engine.state.wkv.data_ptr() == ptr
    assert_rows_equal(rows(engine, [0, 1, 2]), before)
    assert not engine.live[3:].any() and not engine.samp.penalties[3:].any()


def test_grow_past_high_water_reallocates_and_keeps_rows(engine):
    engine.resize(4, [])
    fill(engine, [0, 2, 3])
    before = rows(engine, [2, 3])
    engine.resize(16, [2, 3])
    assert engine.capacity == 16 and engine.state.wkv.shape[1] == 16
    assert_rows_equal(rows(engine, [0, 1]), before)
    assert not engine.live[2:].any()


def test_pulse_after_compaction_equals_pulse_without(tiny_loader):
    """A compacted engine (views into 8 rows) decodes like a fresh 2-slot one holding the same
    rows."""
    a, b = BatchEngine(tiny_loader.model), BatchEngine(tiny_loader.model)
    a.resize(8, [])
    fill(a, list(range(8)))
    a.resize(2, [3, 5])
    b.resize(2, [])
    fill_like(b, a)
    ra, rb = a.pulse(6), b.pulse(6)
    assert sum(map(len, ra.tokens)) == 12
    assert ra.tokens == rb.tokens and ra.reason == rb.reason and ra.current == rb.current
    assert_rows_equal(rows(a, [0, 1]), rows(b, [0, 1]))


def fill_like(dst, src):
    """Make dst's slots hold exactly src's slot tensors."""
    dst.state.shift.copy_(src.state.shift)
    dst.state.wkv.copy_(src.state.wkv)
    dst.samp.assign(list(range(src.capacity)), src.samp)
    for name in ("cur", "n_gen", "max_new", "live"):
        getattr(dst, name).copy_(getattr(src, name))
