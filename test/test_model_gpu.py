"""CUDA checks of the batched forward (run on the GPU machine: pytest -m gpu)."""

import pytest
import torch

from model_cases import DECODE_STEPS, MODELS, make_case, rel_err
from server.model.checkpoint import infer_config
from server.model.forward import RWKV7
from server.model.random import PRESETS, make_random_state_dict
from server.model.state import State

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.fixture(scope="module", params=list(MODELS))
def case(request):
    return make_case(request.param)


def run(model: RWKV7, case, steps: int = DECODE_STEPS) -> torch.Tensor:
    """Prefill of the case's prompts then ``steps`` decode steps: logits [n, 1 + steps, V]."""
    state = model.new_state(len(case.prompts))
    out = [model.prefill(case.prompts, state)]
    toks = case.decode_tokens.cuda()
    out += [model.decode(toks[:, t], state) for t in range(steps)]
    return torch.stack(out, 1).cpu()


@pytest.mark.parametrize("impl", ["triton", "torch"])
@pytest.mark.parametrize("dtype,state_dtype,tol", [
    (torch.float16, torch.float32, 2e-2),
    (torch.bfloat16, torch.float32, 6e-2),
    (torch.float16, torch.float16, 3e-2),
    (torch.float32, torch.float32, 1e-4),
])
def test_cuda_matches_reference(case, dtype, state_dtype, tol, impl):
    model = RWKV7(case.sd, case.cfg, device="cuda", dtype=dtype, state_dtype=state_dtype,
                  wkv_impl=impl)
    got = run(model, case)
    assert torch.isfinite(got).all()
    err = rel_err(got, case.ref_logits)
    print(f"{case.cfg.n_embd=} {impl} {dtype} state {state_dtype}: rel err {err:.2e}")
    assert err < tol


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_is_finite_in_fp16(preset):
    """Each preset's random weights (built on the GPU) run finite in fp16 and close to fp32
    (rounding noise grows with depth: about 4e-2 for the 61-layer 13.3b preset)."""
    L, C = PRESETS[preset]
    sd = make_random_state_dict(L, C, seed=0, dtype=torch.float16, device="cuda")
    cfg = infer_config(sd)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 65536, (n,), generator=g).tolist() for n in (300, 17)]
    outs = []
    for dtype in (torch.float16, torch.float32):
        model = RWKV7(sd, cfg, device="cuda", dtype=dtype)
        state = model.new_state(2)
        logits = [model.prefill(prompts, state)]
        logits += [model.decode(torch.tensor([11, 261], device="cuda"), state) for _ in range(4)]
        outs.append(torch.stack(logits, 1).cpu())
        assert torch.isfinite(outs[-1]).all() and torch.isfinite(state.wkv).all()
        del model, state
        torch.cuda.empty_cache()
    err = rel_err(outs[0], outs[1])
    print(f"{preset}: fp16 vs fp32 rel err {err:.2e}, logits std {outs[1].std():.2f}")
    assert err < 6e-2
    assert outs[1][0, 0].argmax() != outs[1][1, 0].argmax()  # the input matters


def test_a_dropped_model_frees_its_device_memory_at_once():
    """With its graphs captured (prefill and decode), a model dropped by its last name gives
    its device memory back without a garbage collection: no reference cycle holds it (one
    kept a 13.3B's on an H100 until the next full collection: session 59)."""
    import gc
    import weakref

    case = make_case("c512", with_reference=False)

    def used_model():
        model = RWKV7(case.sd, case.cfg, device="cuda")
        state = model.new_state(2)
        model.prefill([[1, 2, 3]], model.new_state(1))  # a graphed single-sequence pass
        model.decode(torch.tensor([5, 6], device="cuda"), state)  # a graphed step
        assert model._graphed_prefill.graphs and model._graphed.graphs
        return model, state

    used_model()  # a first one: cuBLAS's workspaces of the process's lasting streams
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    model, state = used_model()
    held = torch.cuda.memory_allocated() - before
    alive = weakref.ref(model)
    gc.disable()
    try:
        del model, state
        torch.cuda.synchronize()
        assert alive() is None
        left = torch.cuda.memory_allocated() - before
    finally:
        gc.enable()
    # all but cuBLAS's workspace for the model's own side stream (32 MiB on Hopper, kept for
    # the process's life)
    assert held - left > 16 * 2**20 and left <= 32 * 2**20, (held, left)  # (weights ~30 MB)


def test_later_captures_make_no_new_stream(monkeypatch):
    """Every capture's warm-up runs on one stream (``warmup_stream``): cuBLAS keeps a workspace
    for each stream it ran on for the process's life, so a stream per capture left ~32 MiB
    behind for each of a server's ~40 graphs (up to the stream pool's 32 streams)."""
    case = make_case("c512", with_reference=False)
    model = RWKV7(case.sd, case.cfg, device="cuda")
    model.prefill([[1, 2, 3]], model.new_state(1))  # the first graphs (and any side stream)
    model.decode(torch.tensor([5], device="cuda"), model.new_state(1))
    made, real = [], torch.cuda.Stream

    def counting(*args, **kwargs):
        if "stream_id" not in kwargs:  # (not a wrapper of an existing one: current_stream)
            made.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.cuda, "Stream", counting)
    model.prefill([list(range(1, 40))], model.new_state(1))  # other buckets
    model.prefill([list(range(1, 70))], model.new_state(1))
    model.decode(torch.tensor([5, 6], device="cuda"), model.new_state(2))  # other batches
    model.decode(torch.tensor([5, 6, 7, 8], device="cuda"), model.new_state(4))
    assert len(model._graphed_prefill.graphs) == 3 and len(model._graphed.graphs) == 3
    assert made == []


@pytest.mark.parametrize("impl", ["triton", "torch"])
def test_cuda_graph_decode_equals_eager(impl):
    """Graph replay gives the eager logits and states, with and without an active mask, for two
    states used in turn (one graph each); the capture's warm-up leaves the state untouched."""
    case = make_case("c512", with_reference=False)
    eager = RWKV7(case.sd, case.cfg, device="cuda", cuda_graphs=False, wkv_impl=impl)
    graph = RWKV7(case.sd, case.cfg, device="cuda", wkv_impl=impl)
    prompts = [[1, 2, 3], [4] * 9, [7, 8], [5] * 20]
    states = {}
    for name, m in (("eager", eager), ("graph", graph)):
        a, b = m.new_state(4), m.new_state(2)
        m.prefill(prompts, a)
        m.prefill(prompts[:2], b)
        out = []
        for t in range(6):
            toks = torch.tensor([t, t + 1, t + 2, t + 3], device="cuda")
            active = torch.tensor([True, t % 2 == 0, True, t < 3], device="cuda")
            out.append(m.decode(toks, a, active=active if t % 3 else None))
            out.append(m.decode(toks[:2], b))
        states[name] = (a, b, out)
    assert len(graph._graphed.graphs) == 3  # (a, masked), (a, unmasked), (b, unmasked)
    ea, eb, eo = states["eager"]
    ga, gb, go = states["graph"]
    for x, y in zip(eo, go):
        assert rel_err(y, x) < 1e-6
    assert rel_err(ga.wkv.flatten(1), ea.wkv.flatten(1)) < 1e-6
    assert rel_err(gb.shift.flatten(1), eb.shift.flatten(1)) < 1e-6


def test_capture_survives_garbage_collection_of_old_graphs():
    """A dropped model whose graphs sit in a reference cycle is collected whenever Python's
    collector runs; a collection during another graph's capture resets those graphs there, which
    CUDA forbids (the capture failed in the GPU tests). With a collection forced at almost every
    allocation, capturing still works and replays correctly."""
    import gc

    case = make_case("tiny", with_reference=False)
    old = RWKV7(case.sd, case.cfg, device="cuda")
    old.decode(torch.tensor([1], device="cuda"), old.new_state(1))  # one captured graph
    model = RWKV7(case.sd, case.cfg, device="cuda")
    eager = RWKV7(case.sd, case.cfg, device="cuda", cuda_graphs=False)
    old.cycle = old  # garbage only the cycle collector frees
    del old
    thresholds = gc.get_threshold()
    gc.set_threshold(1)
    try:
        outs = []
        for m in (model, eager):
            state = m.new_state(2)
            outs.append(m.decode(torch.tensor([3, 4], device="cuda"), state))
    finally:
        gc.set_threshold(*thresholds)
    assert len(model._graphed.graphs) == 1
    assert rel_err(outs[0], outs[1]) < 1e-3


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float16, 1e-2)])
def test_cuda_graph_prefill_equals_eager(dtype, tol):
    """Single-sequence prefill from the bucket graphs (lengths in several buckets, a prompt of
    several chunks, a state that already holds a prompt) gives the eager pass's logits and
    state; one graph per bucket."""
    case = make_case("c512", with_reference=False)
    eager = RWKV7(case.sd, case.cfg, device="cuda", dtype=dtype, cuda_graphs=False,
                  prefill_chunk=64)
    graph = RWKV7(case.sd, case.cfg, device="cuda", dtype=dtype, prefill_chunk=64)
    V = case.cfg.vocab_size
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, V, (n,), generator=g).tolist() for n in (3, 16, 30, 200, 5)]
    outs = {}
    for name, m in (("eager", eager), ("graph", graph)):
        st = m.new_state(1)
        outs[name] = [(m.prefill([p], st), st.wkv.clone(), st.shift.clone()) for p in prompts]
    for e, gr in zip(outs["eager"], outs["graph"]):
        for x, y in zip(e, gr):
            assert rel_err(y.flatten(1), x.flatten(1)) < tol
    assert sorted(graph._graphed_prefill.graphs) == [16, 32, 64]


def test_decode_graphs_on_views_of_one_state_share_their_logits_buffer():
    """An engine's capacities are views of one full-size state: their graphs write one logits
    buffer (the largest's rows), and each replay gives the eager step's logits and state."""
    case = make_case("c512", with_reference=False)
    eager = RWKV7(case.sd, case.cfg, device="cuda", cuda_graphs=False)
    graph = RWKV7(case.sd, case.cfg, device="cuda")
    full = {name: m.new_state(8) for name, m in (("eager", eager), ("graph", graph))}
    for name, m in (("eager", eager), ("graph", graph)):
        m.prefill([[1, 2, 3]] * 8, full[name])
    for rows in (2, 8, 4, 8, 2):
        toks = torch.arange(rows, device="cuda") + rows
        views = [State(s.shift[:, :, :rows], s.wkv[:, :rows]) for s in full.values()]
        want = eager.decode(toks, views[0])
        got = graph.decode(toks, views[1], borrow=True)
        assert rel_err(got, want) < 1e-6
    assert len(graph._graphed.graphs) == 3 and len(graph._graphed._outs) == 1
    (buf,) = graph._graphed._outs.values()
    assert buf.shape[0] == 8
    assert {g.logits.data_ptr() for g in graph._graphed.graphs.values()} == {buf.data_ptr()}
    assert rel_err(full["graph"].wkv.flatten(1), full["eager"].wkv.flatten(1)) < 1e-6


@pytest.mark.parametrize("rows_a,rows_b", [(2, 4), (4, 2), (8, 8), (16, 32), (32, 16)])
def test_a_decode_replay_leaves_another_graphs_logits(rows_a, rows_b):
    """The decode graphs share a memory pool; their logits live outside it, so one graph's
    replay (another scheduler's, on the same model) never writes where a graph captured after
    it keeps the logits a scheduler has borrowed and not yet sampled (session 63's review)."""
    case = make_case("c512", with_reference=False)
    m = RWKV7(case.sd, case.cfg, device="cuda")
    a, b = m.new_state(rows_a), m.new_state(rows_b)
    ta = torch.arange(rows_a, device="cuda")
    tb = torch.arange(rows_b, device="cuda") + 5
    m.decode(ta, a, borrow=True)  # graph A captured first
    m.decode(tb, b, borrow=True)  # then B, into the same pool
    kept = m.decode(tb, b, borrow=True)  # B's output buffer itself
    before = kept.clone()
    m.decode(ta, a, borrow=True)
    assert len(m._graphed.graphs) == 2
    assert torch.equal(kept, before)
    # (where the allocator puts things aside: no graph's logits lie in the graphs' pool)
    pool = tuple(m._graphed.pool)
    for g in m._graphed.graphs.values():
        p = g.logits.data_ptr()
        assert not any(tuple(seg.get("segment_pool_id", (0, 0))) == pool
                       and seg["address"] <= p < seg["address"] + seg["total_size"]
                       for seg in torch.cuda.memory_snapshot())
    # and the graph wrote them: the eager step's logits (B's second step)
    eager = RWKV7(case.sd, case.cfg, device="cuda", cuda_graphs=False)
    e = eager.new_state(rows_b)
    for _ in range(2):  # (B's two replays)
        want = eager.decode(tb, e)
    assert rel_err(kept, want) < 1e-6
