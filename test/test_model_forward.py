"""Batched RWKV7 (CPU fp32) against the one-token-at-a-time reference: prefill of mixed lengths in
chunks, decode, states, batch invariance, masking of inactive rows."""

import pytest
import torch

from model_cases import DECODE_STEPS, MODELS, make_case, one_thread, rand_tokens, rel_err
from server.model.forward import RWKV7
from server.model.state import State

TOL = 1e-4  # CPU fp32 contract
SAME = 5e-5  # "equal" up to fp32 summation order (batch size, chunking change matmul blocking)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    with one_thread():
        yield


@pytest.fixture(scope="module", params=list(MODELS))
def case(request):
    return make_case(request.param)


@pytest.fixture(scope="module")
def c512_ref(case):
    if case.cfg.n_embd != 512:
        pytest.skip("runs on the C=512 model only")
    return case


@pytest.fixture(scope="module")
def c512():
    return make_case("c512", with_reference=False)


def assert_state_close(a: State, b: State, tol: float):
    """Per layer (and per row), relative error of the WKV matrices and the shift vectors."""
    assert a.batch_size == b.batch_size
    assert rel_err(a.wkv.transpose(0, 1).flatten(2), b.wkv.transpose(0, 1).flatten(2)) < tol
    assert rel_err(a.shift.transpose(1, 2).flatten(2), b.shift.transpose(1, 2).flatten(2)) < tol


def test_prefill_then_decode_matches_reference(case):
    """Prompts of 1, 7, 64, 300 tokens in one batch (300 spans two 256-token chunks), then 64
    batched decode steps: every logits row and the final state agree with the reference."""
    model = RWKV7(case.sd, case.cfg)
    state = model.new_state(len(case.prompts))
    got = [model.prefill(case.prompts, state)]
    for t in range(DECODE_STEPS):
        got.append(model.decode(case.decode_tokens[:, t], state))
    got = torch.stack(got, 1)  # [n, 1 + steps, V]
    assert got.dtype == torch.float32 and got.shape == case.ref_logits.shape
    assert rel_err(got, case.ref_logits) < TOL
    for i, ref_state in enumerate(case.ref_states):
        assert_state_close(state.select([i]), ref_state, TOL)


def test_decode_token_by_token_reaches_the_same_state(c512_ref):
    """Every token (prompt + decode) fed by decode alone, rows idle (active=False) once their
    sequence ends, gives the same last logits and final state as the reference (and so as
    prefill + decode). Prompts of 1, 7 and 64 tokens (the 300 one would only add time)."""
    case, n = c512_ref, 3
    model = RWKV7(case.sd, case.cfg)
    seqs = [p + d for p, d in zip(case.prompts[:n], case.decode_tokens.tolist())]
    lens = torch.tensor([len(s) for s in seqs])
    toks = torch.zeros(n, int(lens.max()), dtype=torch.long)
    for i, s in enumerate(seqs):
        toks[i, :len(s)] = torch.tensor(s)
    state, last = model.new_state(n), [None] * n
    for t in range(toks.shape[1]):
        logits = model.decode(toks[:, t], state, active=lens > t)
        for i in torch.nonzero(lens == t + 1).flatten().tolist():
            last[i] = logits[i]
    assert rel_err(torch.stack(last), case.ref_logits[:n, -1]) < TOL
    for i in range(n):
        assert_state_close(state.select([i]), case.ref_states[i], TOL)


def run_alone_and_batched(model, prompts, steps=3):
    """Logits [n, 1 + steps, V] and final state of ``prompts`` as one batch and one by one."""
    dec = torch.tensor([rand_tokens(steps, model.cfg.vocab_size, 7 + i) for i in range(len(prompts))])

    def run(rows):
        st = model.new_state(len(rows))
        out = [model.prefill([prompts[i] for i in rows], st)]
        out += [model.decode(dec[rows, t], st) for t in range(steps)]
        return torch.stack(out, 1), st

    batched, st = run(list(range(len(prompts))))
    alone = [run([i]) for i in range(len(prompts))]
    return batched, st, alone


@pytest.mark.parametrize("chunk,budget", [(256, 16384), (16, 48), (16, 96)])
def test_batch_invariance(c512, chunk, budget):
    """Each of 8 sequences gets the same logits and state in a batch as alone, also when prompts
    are cut into 16-token chunks and at most 48 or 96 tokens go through a pass (rows in groups:
    with 96, groups of three rows, longest first, whose ending rows are not consecutive slots:
    their last positions go to the logits through index tensors, not a slice)."""
    model = RWKV7(c512.sd, c512.cfg, prefill_chunk=chunk, prefill_tokens=budget)
    prompts = [rand_tokens(n, 1024, n) for n in (5, 33, 1, 70, 12, 64, 2, 40)]
    batched, st, alone = run_alone_and_batched(model, prompts)
    for i, (logits, st_i) in enumerate(alone):
        assert rel_err(batched[i], logits[0]) < SAME
        assert_state_close(st.select([i]), st_i, SAME)


def test_a_pass_holds_at_most_prefill_tokens_padded_tokens(c512, monkeypatch):
    """``prefill_tokens`` bounds a pass's tokens as it runs, padding included: 1-token prompts
    go ``prefill_align`` wide, so a budget of 48 takes 48 // align rows a pass (it took 48
    rows, 16x its budget: session 23's review); results stay those of one pass."""
    model = RWKV7(c512.sd, c512.cfg, prefill_tokens=48)
    align = model.prefill_align
    assert model.split_invariant and 1 < align <= 48
    passes, real = [], model._forward_padded

    def spy(parts, *a, **k):
        passes.append((len(parts), -(-max(map(len, parts)) // align) * align))
        return real(parts, *a, **k)

    monkeypatch.setattr(model, "_forward_padded", spy)
    prompts = [rand_tokens(1, 1024, 200 + i) for i in range(12)] + [rand_tokens(3, 1024, 7)]
    out = model.prefill(prompts, model.new_state(len(prompts)))
    assert passes and all(rows * width <= 48 for rows, width in passes)
    assert sum(rows for rows, _ in passes) == len(prompts)
    one = RWKV7(c512.sd, c512.cfg)
    assert rel_err(out, one.prefill(prompts, one.new_state(len(prompts)))) < SAME


def test_chunking_does_not_change_results(c512):
    """The same prompts with 256-, 16- and 7-token chunks give the same logits."""
    prompts = [rand_tokens(n, 1024, n) for n in (100, 3, 45)]
    out = []
    for chunk in (256, 16, 7):
        model = RWKV7(c512.sd, c512.cfg, prefill_chunk=chunk)
        out.append(model.prefill(prompts, model.new_state(3)))
    assert rel_err(out[1], out[0]) < SAME and rel_err(out[2], out[0]) < SAME


def test_prefill_continues_from_the_rows_state(c512):
    """Prefill of a then b (rows already holding a) equals prefill of a + b."""
    model = RWKV7(c512.sd, c512.cfg)
    a = [rand_tokens(n, 1024, n) for n in (20, 1, 9)]
    b = [rand_tokens(n, 1024, 50 + n) for n in (3, 30, 1)]
    s1, s2 = model.new_state(3), model.new_state(3)
    model.prefill(a, s1)
    split = model.prefill(b, s1)
    whole = model.prefill([x + y for x, y in zip(a, b)], s2)
    assert rel_err(split, whole) < SAME
    assert_state_close(s1, s2, SAME)


def test_inactive_rows_are_left_exactly_unchanged(c512):
    model = RWKV7(c512.sd, c512.cfg)
    state = model.new_state(4)
    model.prefill([rand_tokens(n, 1024, n) for n in (4, 9, 2, 6)], state)
    before = state.clone()
    active = torch.tensor([True, False, True, False])
    logits = model.decode(torch.tensor([1, 2, 3, 4]), state, active=active)
    for i in (1, 3):
        assert torch.equal(state.wkv[:, i], before.wkv[:, i])
        assert torch.equal(state.shift[:, :, i], before.shift[:, :, i])
    sub = before.select([0, 2])
    expect = model.decode(torch.tensor([1, 3]), sub)
    assert rel_err(logits[[0, 2]], expect) < SAME
    assert_state_close(state.select([0, 2]), sub, SAME)


def test_greedy_output_depends_on_the_input(case):
    """Random weights give non-degenerate logits: the argmax differs between prompts."""
    argmax = case.ref_logits.argmax(-1).flatten()
    assert len(set(argmax.tolist())) > argmax.numel() // 2
    assert 0.5 < case.ref_logits.std(-1).mean() < 10


def test_bad_calls_are_rejected(c512):
    model = RWKV7(c512.sd, c512.cfg)
    with pytest.raises(ValueError, match="empty"):
        model.prefill([[1, 2], []], model.new_state(2))
    with pytest.raises(ValueError, match="state has 3 rows"):
        model.decode(torch.tensor([1, 2]), model.new_state(3))


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-2), (torch.bfloat16, 6e-2)])
def test_half_precision_on_cpu_is_finite_and_close(case, dtype, tol):
    """fp16/bf16 weights and activations (fp32 state): finite, and close to the reference
    (tiny model only: half-precision products are slow on CPUs without native support)."""
    if case.cfg.n_embd != 128:
        pytest.skip("tiny model only")
    model = RWKV7(case.sd, case.cfg, dtype=dtype)
    state = model.new_state(len(case.prompts))
    got = [model.prefill(case.prompts, state)]
    got += [model.decode(case.decode_tokens[:, t], state) for t in range(8)]
    got = torch.stack(got, 1)
    assert torch.isfinite(got).all() and torch.isfinite(state.wkv).all()
    assert state.shift.dtype == dtype and state.wkv.dtype == torch.float32
    assert rel_err(got, case.ref_logits[:, :9]) < tol


def test_a_dropped_model_with_graph_wrappers_is_freed_without_a_collection():
    """The graph wrappers hold the model's methods weakly: a model dropped by its last name
    frees its weights at once, not at Python's next full collection (on CUDA the wrappers
    exist for every model; a cycle kept a dropped 7.2B's weights on the device, and 13.3B's
    test then ran out of an H100's memory)."""
    import gc
    import weakref

    from server.model.checkpoint import infer_config
    from server.model.cuda_graph import GraphedDecode, GraphedPrefill
    from server.model.random import make_random_state_dict

    sd = make_random_state_dict(1, 64, 256, seed=1)
    model = RWKV7(sd, infer_config(sd), prefill_chunk=32)
    model._graphed_prefill = GraphedPrefill(model._forward, model.new_state, graphs=False)
    model._graphed = GraphedDecode(model._decode_step)
    state = model.new_state(1)
    model.prefill([[1, 2, 3]], state)  # (through the wrapper's padded pass)
    assert list(model._graphed_prefill.graphs) == [16]
    alive = weakref.ref(model)
    was_on = gc.isenabled()
    gc.disable()
    try:
        del model
        assert alive() is None
    finally:
        if was_on:
            gc.enable()


def test_single_sequence_prefill_padded_to_its_bucket_is_unchanged():
    """GraphedPrefill's padded pass (run eagerly here; on CUDA it is replayed from a graph per
    length bucket): lengths across buckets and several chunks give the same state, logits
    and next decode step as the unpadded pass, starting from a nonzero state."""
    from server.model.checkpoint import infer_config
    from server.model.cuda_graph import GraphedPrefill
    from server.model.forward import RWKV7
    from server.model.random import make_random_state_dict

    sd = make_random_state_dict(2, 128, 512, seed=5)
    cfg = infer_config(sd)
    plain = RWKV7(sd, cfg, prefill_chunk=40)
    padded = RWKV7(sd, cfg, prefill_chunk=40)
    padded._graphed_prefill = GraphedPrefill(padded._forward, padded.new_state, graphs=False)
    # graphs asked for where none can be captured (no CUDA here): each bucket falls back to
    # the eager padded pass, with a warning, instead of failing the prefill
    fallback = RWKV7(sd, cfg, prefill_chunk=40)
    fallback._graphed_prefill = GraphedPrefill(fallback._forward, fallback.new_state)
    g = torch.Generator().manual_seed(0)
    for n in (1, 5, 16, 17, 40, 93):
        toks = torch.randint(0, 512, (n,), generator=g).tolist()
        states = []
        for m in (plain, padded, fallback):
            st = m.new_state(1)
            st.wkv.normal_(generator=torch.Generator().manual_seed(n))
            logits = m.prefill([toks], st)
            states.append((st, logits, m.decode(torch.tensor([7]), st)))
        (a, la, da) = states[0]
        for b, lb, db in states[1:]:
            for x, y in ((a.wkv, b.wkv), (a.shift, b.shift), (la, lb), (da, db)):
                assert torch.allclose(x, y, rtol=1e-5, atol=1e-5), n
    assert sorted(padded._graphed_prefill.graphs) == [16, 32, 48]  # buckets used
    assert all(g.graph is None for g in fallback._graphed_prefill.graphs.values())
    bucket = padded._graphed_prefill.bucket
    assert [bucket(n) for n in (1, 16, 17, 65, 152, 158, 189, 200, 256, 257, 512, 513, 554,
                                768, 1000)] == \
        [16, 16, 32, 80, 160, 160, 192, 208, 256, 288, 512, 768, 768, 768, 1024]


def test_one_head_model_prefills_rows_together():
    """C = 64 (one head, a size the generator accepts): two rows in one pass failed (the WKV
    output was a slice .view could not flatten; a review, session 14). Rows together equal
    rows alone."""
    from server.model.checkpoint import infer_config
    from server.model.random import make_random_state_dict

    sd = make_random_state_dict(2, 64, 300, seed=1)
    m = RWKV7(sd, infer_config(sd), device="cpu", dtype=torch.float32)
    both = m.prefill([[1, 2, 3], [4, 5]], m.new_state(2))
    alone = torch.cat([m.prefill([[1, 2, 3]], m.new_state(1)),
                       m.prefill([[4, 5]], m.new_state(1))])
    assert torch.allclose(both, alone, atol=1e-4, rtol=0)


def test_decode_graphs_logits_buffers_are_dropped_with_their_last_graph():
    """The decode graphs' logits buffers (one per state storage, ``GraphedDecode._out``) go
    when no graph uses them: at the LRU eviction of their state's last graph, and after a
    capture that failed (its buffer was made before the capture). A CPU stand-in for the
    capture; the GPU tests replay real graphs."""
    from model_cases import stand_in_graphs

    fail = []
    gd, decode, full = stand_in_graphs(2, fail)

    la, lb = decode("a", 2), decode("a", 4)
    assert len(gd._outs) == 1 and la.data_ptr() == lb.data_ptr()  # one buffer, 4 rows
    assert next(iter(gd._outs.values())).shape == (4, 8)
    decode("b", 1)  # a's first graph evicted, its second keeps the buffer
    assert len(gd.graphs) == 2 and len(gd._outs) == 2
    decode("c", 1)  # a's last graph evicted: its buffer goes
    assert len(gd._outs) == 2
    assert {k[0] for k in gd._outs} == {full[n].wkv.untyped_storage().data_ptr() for n in "bc"}
    fail.append(1)
    with pytest.raises(RuntimeError, match="capture failed"):
        decode("a", 4)
    assert len(gd._outs) == 2 and len(gd.graphs) == 2
