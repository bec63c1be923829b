"""BatchEngine slot storage: views of high-water buffers, in-place compaction, free rows neutral,
reallocation past the high-water mark, and a pulse after compaction equal to one without."""

import pytest
import torch

from server.bench.common import DummyTask
from server.model.sampler import SamplingBatch
from server.scheduler.engine import REASON_STOP, BatchEngine
from server.scheduler.probe import EndProbe


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
    firsts = {s: torch.full((engine.vocab_size,), float(s)) for s in (2, 6)}
    for s, x in firsts.items():  # (a prompt's last logits, its first token's: they follow the
        engine.set_first(s, x)  # row; a mutant left them behind, session 43's review)
    keep = [1, 2, 6]
    before = rows(engine, keep)
    engine.resize(4, keep)
    assert engine.capacity == 4 and engine.state.batch_size == 4
    assert engine.state.wkv.data_ptr() == ptr  # same buffer: graphs keyed by it stay valid
    assert_rows_equal(rows(engine, [0, 1, 2]), before)
    assert not engine.has_first(0)
    assert torch.equal(engine.first_logits(1), firsts[2])
    assert torch.equal(engine.first_logits(2), firsts[6])
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
    engine.request_stop(3)  # a stop asked before the growth follows its row (dropped in the
    engine.resize(16, [2, 3])  # copy, no test failed: session 41's mutation review)
    assert engine.capacity == 16 and engine.state.wkv.shape[1] == 16
    assert_rows_equal(rows(engine, [0, 1]), before)
    assert not engine.live[2:].any()
    assert engine.stop_host[:3].tolist() == [False, True, False]
    res = engine.pulse(3)
    assert res.reason[1] == REASON_STOP and not res.tokens[1] and len(res.tokens[0]) == 3


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
    for name in ("cur", "n_gen", "max_new", "turn", "live"):
        getattr(dst, name).copy_(getattr(src, name))


def _start_prompts(engine, prompts, merged: set[int]):
    """Slot i gets prompt i with fresh state; slots in ``merged`` feed the last token with the
    prompt (first token from the prefill pass), the others leave it to the first decode step."""
    slots = list(range(len(prompts)))
    engine.load(slots, [DummyTask(temperature=0.0 if i == 0 else 1.0, seed=7 + i)
                        for i in slots])
    for i, p in enumerate(prompts):
        engine.prefill([i], [p if i in merged else p[:-1]], first={i} if i in merged else ())
    engine.start(slots, [p[-1] for p in prompts], [6] * len(prompts))


def _count_decodes(engine, monkeypatch):
    calls, real = [], engine.model.decode
    monkeypatch.setattr(engine.model, "decode",
                        lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    return calls


@pytest.mark.parametrize("merged", [{0, 1, 2}, {1}])
def test_first_token_from_the_prefill_pass_equals_a_decode_step(tiny_loader, merged,
                                                                monkeypatch):
    """Feeding a prompt's last token with the prompt and sampling the first token from that
    pass's logits gives the tokens, states and random streams of feeding it in the first decode
    step; with every live row merged the pulse's first step runs no model at all."""
    prompts = [[5 + i + 3 * j for j in range(9 + 4 * i)] for i in range(3)]
    a, b = BatchEngine(tiny_loader.model), BatchEngine(tiny_loader.model)
    for e in (a, b):
        e.resize(4, [])
    _start_prompts(a, prompts, set())
    _start_prompts(b, prompts, merged)
    assert [b.has_first(i) for i in range(3)] == [i in merged for i in range(3)]
    calls = _count_decodes(a, monkeypatch)  # (one model for both)
    ra = a.pulse(6)
    n_a = len(calls)
    rb = b.pulse(6)
    assert n_a == 6 and len(calls) - n_a == (5 if len(merged) == 3 else 6)
    assert ra.tokens == rb.tokens and ra.reason == rb.reason and ra.current == rb.current
    assert all(len(t) == 6 for t in ra.tokens[:3])
    sa, sb = a.state.select(torch.arange(3)), b.state.select(torch.arange(3))
    assert torch.allclose(sa.wkv, sb.wkv, atol=1e-4) and torch.allclose(sa.shift, sb.shift, atol=1e-4)
    assert torch.equal(a.samp.counter[:3], b.samp.counter[:3])
    assert not any(b.has_first(i) for i in range(3))


def test_a_stop_before_the_first_step_of_a_merged_row_comes_after_one_token(tiny_loader):
    """The merged row's state has consumed its last prompt token, so it cannot stop before its
    first token (host bookkeeping would count that token twice): it stops after one step; a
    row fed the usual way stops at once."""
    e = BatchEngine(tiny_loader.model)
    e.resize(2, [])
    _start_prompts(e, [[4, 5, 6, 7], [8, 9, 10, 11]], {0})
    e.request_stop(0)
    e.request_stop(1)
    res = e.pulse(4)
    assert len(res.tokens[0]) == 1 and res.tokens[1] == [] and res.reason == [3, 3]


def test_warm_step_changes_nothing(engine):
    """The warm-up's pulse step (every row taken as done) leaves live and free slots as they
    were: states, penalties, random streams, current tokens, counts, liveness."""
    engine.resize(4, [])
    fill(engine, [0, 1])
    before = rows(engine, [0, 1, 2, 3]) + (engine.n_gen.clone(), engine.max_new.clone())
    engine.warm_step()
    after = rows(engine, [0, 1, 2, 3]) + (engine.n_gen.clone(), engine.max_new.clone())
    for a, b in zip(before, after):
        assert torch.equal(a, b)


def test_one_long_pulse_equals_one_step_pulses(tiny_loader):
    """A pulse draws its rows' uniforms for all its steps at once (counter + step); the tokens,
    random streams and penalties must be those of the same steps run as one-step pulses: rows
    sampling with different parameters, a greedy row, rows ending mid-pulse (max_tokens 3 and
    5), a free slot, a first step from kept logits."""
    prompts = [[5 + i, 9, 13 + 2 * i, 40 + i] for i in range(4)]
    results = []
    for plan in ([12], [1] * 12):
        engine = BatchEngine(tiny_loader.model)
        engine.resize(8, [])
        tasks = [DummyTask(temperature=0.0), DummyTask(temperature=1.0, seed=3),
                 DummyTask(temperature=0.8, top_k=20, seed=4, presence_penalty=0.5),
                 DummyTask(temperature=1.2, top_p=0.7, seed=5, repetition_penalty=0.3)]
        engine.load([0, 1, 2, 3], tasks)
        engine.prefill([0, 1, 2, 3], prompts, first={0, 1, 2, 3})
        engine.start([0, 1, 2, 3], [p[-1] for p in prompts], [12, 3, 12, 5])
        tokens = [[] for _ in range(4)]
        for steps in plan:
            res = engine.pulse(steps)
            for i in range(4):
                tokens[i] += res.tokens[i]
        results.append((tokens, engine.samp.counter[:4].tolist(),
                        engine.samp.penalties[:4].clone()))
    (t1, c1, p1), (t2, c2, p2) = results
    assert t1 == t2 and c1 == c2 and torch.equal(p1, p2)
    assert [len(t) for t in t1][1] == 3 and len(t1[3]) == 5  # ended mid-pulse


def test_load_and_start_write_each_parameter_to_its_row(engine):
    """Tasks loaded into slots out of order: every sampling parameter and counter lands in its
    task's row (the packed tensors' rows map to the right names), the other rows stay neutral;
    start sets current, max_new and n_gen = 0 per row."""
    engine.resize(4, [])
    tasks = {slot: DummyTask(temperature=0.1 + slot, top_p=0.2 + slot / 10, top_k=3 + slot,
                             min_p=0.05 * slot,
                             presence_penalty=0.3 + slot, repetition_penalty=0.4 + slot,
                             penalty_decay=0.5 + slot / 10, seed=1000 + slot,
                             rng_counter=20 + slot) for slot in (3, 1)}
    engine.load(list(tasks), list(tasks.values()))
    engine.start(list(tasks), [70 + s for s in tasks], [900 + s for s in tasks])
    names = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
             "presence": "presence_penalty", "repetition": "repetition_penalty",
             "decay": "penalty_decay", "seed": "seed", "counter": "rng_counter"}
    free = SamplingBatch.empty(1, engine.vocab_size)
    for slot in range(4):
        for field, attr in names.items():
            got = getattr(engine.samp, field)[slot]
            want = getattr(tasks[slot], attr) if slot in tasks else getattr(free, field)[0]
            assert got.item() == pytest.approx(float(want)), (slot, field)
    assert engine.cur.tolist()[1::2] == [71, 73] and engine.max_new.tolist()[1::2] == [901, 903]
    assert engine.n_gen.tolist() == [0, 0, 0, 0]
    assert engine.live.tolist() == [False, True, False, True]


def _device_params(engine):
    s = engine.samp
    return torch.stack([s.temperature.double(), s.top_k.double(), s.top_p.double(),
                        s.min_p.double()]).numpy()


def test_host_copy_of_plan_parameters_follows_every_move(engine):
    """The sampler's plan reads the slot buffers' host copy of temperature / top-k / top-p (no
    device read after a load): equal to the device rows after loads (values that round in
    float32 or wrap in int32), compaction, growth past the high-water mark and freed rows; and
    the plan built from it is the plan built from the device."""
    def check():
        assert engine.samp.host.shape == (4, engine.capacity)
        assert (engine.samp.host == _device_params(engine)).all()
        from_host = engine.sampler._make_plan(engine.samp)
        host, engine.samp.host = engine.samp.host, None  # the same batch, read from the device
        try:
            from_dev = engine.sampler._make_plan(engine.samp)
        finally:
            engine.samp.host = host
        assert from_host.any_greedy == from_dev.any_greedy
        assert from_host.min_p == from_dev.min_p
        assert [(d, None if r is None else r.tolist(), k) for d, r, k in from_host.groups] == \
            [(d, None if r is None else r.tolist(), k) for d, r, k in from_dev.groups]

    engine.resize(4, [])
    check()
    odd = [DummyTask(temperature=0.0, top_k=0, top_p=1.0, min_p=0.5),
           DummyTask(temperature=0.1, top_p=0.3),
           DummyTask(temperature=1.0, top_k=(1 << 32) + 5, top_p=0.99999999, min_p=0.1)]
    engine.load([3, 0, 2], odd)  # greedy, top-k, sorted: all three plan groups
    check()
    engine.resize(4, [2, 3])  # compaction: rows 2, 3 -> 0, 1, the others neutral
    check()
    engine.load([2], [DummyTask(temperature=0.7, top_k=7)])
    engine.resize(16, [0, 2, 1])  # past the high-water mark: new buffers
    check()
    engine.resize(2, [1])
    check()


def test_what_load_writes_reaches_every_reader(engine):
    """A loaded row's sampling parameters, penalties and random-stream position, as loaded
    (later changes to the task do not count), reach every reader: a copy-back right after the
    load (no start), a compaction that moves the row before its start, a slot loaded twice
    (the second task wins), and a pulse."""
    engine.resize(4, [])
    pen = torch.rand(engine.vocab_size, generator=torch.Generator().manual_seed(5))
    home = DummyTask(temperature=0.3, top_k=9, seed=77, rng_counter=41)
    home.penalties = pen.clone()
    engine.load([1], [home])
    home.penalties, home.rng_counter = None, None
    done = []
    engine.unload([1], [home], lambda tasks, err: done.append(err))
    assert engine.copyback.wait_idle(10) and done == [None]
    assert torch.equal(home.penalties, pen) and home.rng_counter == 41
    engine.free([1])

    first = DummyTask(temperature=0.9, top_k=2, seed=1, rng_counter=0)
    moved = DummyTask(temperature=0.25, top_k=5, top_p=0.5, seed=123, rng_counter=6)
    engine.load([3], [first])
    engine.load([3], [moved])  # the same slot again before anything read it
    engine.resize(2, [3])  # row 3 -> 0 before its start
    engine.start([0], [10], [4])
    s = engine.samp
    got = (s.temperature[0].item(), s.top_k[0].item(), s.top_p[0].item(), s.seed[0].item(),
           s.counter[0].item())
    assert got == pytest.approx((0.25, 5, 0.5, 123, 6))
    assert not s.penalties[0].any() and not s.penalties[1].any()
    res = engine.pulse(3)
    assert len(res.tokens[0]) == 3 and res.tokens[1] == []
    assert engine.samp.counter[0].item() == 9  # its random stream went on from 6


def test_accepted_tokens_are_each_rows_valid_tokens_in_order():
    """The pulse's token lists come from one selection over the whole [rows, steps] array: the
    same as selecting row by row (rows with none, all, and gaps among their valid steps)."""
    import numpy as np

    from server.scheduler.engine import accepted

    out = np.arange(5 * 4).reshape(5, 4) + 100
    valid = np.array([[0, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0], [0, 1, 0, 1], [1, 0, 0, 0]])
    assert accepted(out, valid) == [[], [104, 105, 106, 107], [108, 109], [113, 115], [116]]
    assert accepted(out[:0], valid[:0]) == []


@pytest.mark.parametrize("max_batch", [1, 2, 16])
def test_warm_requests_leave_the_engine_as_they_found_it(tiny_loader, max_batch):
    """``warm_requests`` (a CUDA server's warm-up: every sampling and prefill variant once, so
    that Triton compiles them before the first request) frees its rows: no row stays live, the
    capacity is the one before, and requests after it give the tokens they give without it
    (greedy and seeded, two at once)."""
    from server.scheduler import DynamicScheduler
    from server.scheduler.engine import WARM_SAMPLING

    def served(warm: bool):
        sched = DynamicScheduler(tiny_loader, max_batch, 4)
        sched.engine.capture_graphs(max_batch)
        cap = sched.engine.capacity
        if warm:
            together = 1 + (max_batch > 1)  # prompts of differing lengths, and equal ones
            assert sched.engine.warm_requests() == together + len(WARM_SAMPLING)
            assert not bool(sched.engine.live.any()) and sched.engine.capacity == cap
        a = sched.new_task("User: hi\n\nAssistant:", max_tokens=6, temperature=0)
        b = sched.new_task("User: hello", max_tokens=6, temperature=1.0, top_k=5, seed=3)
        sched.run()
        return a.output, b.output

    assert served(True) == served(False)


CUDA = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA")])


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("eos_call", [3, 6])
def test_a_pulse_ends_once_every_row_has_ended(tiny_model_path, monkeypatch, eos_call, device):
    """A pulse ran all its steps after its last row had ended (end of text, max_tokens): a
    reply's end waited up to buffer_size - 1 idle decode steps (31 by default; ~1 s of a 0.1B
    model on a CPU). It ends at the step after (CPU: its flags are read at once; CUDA: LAG - 1
    steps later, the host reading them behind the device). Row 0 meets end of text at decode
    call ``eos_call``, row 1 its max_tokens (4) after four tokens; the tokens are those of the
    pulse run to its end."""
    from server.model.loader import RWKV070ModelLoader
    from server.scheduler.probe import LAG

    loader = RWKV070ModelLoader(tiny_model_path, device=device)
    results = []
    for probe in (True, False):
        e = BatchEngine(loader.model)
        e.resize(2, [])
        e.load([0, 1], [DummyTask(temperature=0.0), DummyTask(temperature=0.0)])
        e.prefill([0, 1], [[5, 9, 13], [6, 10, 14]])
        e.start([0, 1], [40, 41], [20, 4])
        calls, real = [], e.model.decode

        def decode(*a, **k):
            calls.append(1)
            logits = real(*a, **k)
            if len(calls) == eos_call:
                logits[0, 0] = logits[0].max() + 100.0  # end of text for row 0 (greedy)
            return logits

        monkeypatch.setattr(e.model, "decode", decode)
        if not probe:
            monkeypatch.setattr(EndProbe, "ended", lambda self: False)
        res = e.pulse(16)
        monkeypatch.undo()
        results.append((res.tokens[:2], res.reason[:2], res.steps, len(calls)))
    (tokens, reasons, steps, calls_made), (tokens_all, reasons_all, steps_all, _) = results
    assert tokens == tokens_all and reasons == reasons_all and steps_all == 16
    assert len(tokens[1]) == 4 and len(tokens[0]) == eos_call - 1
    last_end = max(eos_call, 4)  # the step (1-based) at which the last row ended
    late = LAG - 1 if device == "cuda" else 0
    assert steps == last_end + late and calls_made == last_end + late


def test_freeing_several_slots_at_once_stops_every_one(engine):
    """``free`` of several slots (a run of them: through a slice; scattered: through an index
    tensor) takes each one off the live rows, not only the first (a mutation review: a fill of
    the first row alone passed every test)."""
    engine.resize(6, [])
    fill(engine, list(range(6)))
    engine.free([1, 2, 3])
    assert engine.live.tolist() == [True, False, False, False, True, True]
    engine.free([5, 0])
    assert engine.live.tolist() == [False, False, False, False, True, False]


@pytest.mark.parametrize("per,copies", [(1, []), (2, [2, 2]), (3, [3, 2])])
def test_a_pass_over_scattered_slots_gathers_at_most_its_budget(tiny_loader, monkeypatch, per,
                                                                 copies):
    """Slots that are not consecutive are gathered for their pass ``gather_bytes`` at a time
    (``copies``: the rows of each copy; a group of one slot is fed in place), and the states
    and first-token logits equal one pass over them all."""
    engines = [BatchEngine(tiny_loader.model) for _ in range(2)]
    slots = [6, 1, 4, 3, 0]
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(1, 200, (n,), generator=g).tolist() for n in (5, 9, 2, 7, 4)]
    gathered = []
    select = type(engines[0].state).select
    monkeypatch.setattr(type(engines[0].state), "select",
                        lambda st, idx: (gathered.append(len(idx)), select(st, idx))[1])
    for e in engines:
        e.resize(8, [])
        fill(e, list(range(8)))
    engines[1].gather_bytes = per * engines[1].state.row_bytes()
    for e in engines:
        e.prefill(slots, prompts, first={1, 3})
    assert gathered == [len(slots)] + copies
    assert_rows_equal(rows(engines[0], list(range(8))), rows(engines[1], list(range(8))))
    for s in (1, 3):
        assert torch.equal(engines[0]._first[s], engines[1]._first[s])
