"""The fused element-wise kernels of the CUDA fast path (server/model/fused.py): run through
Triton's CPU interpreter against the plain torch forward, and (marker gpu) on CUDA against the
plain forward and the fp32 reference."""

import pytest
import torch
from model_cases import run_interpreted

# prefill of unequal prompts (padding: keep + last), then decode steps with an inactive row;
# logits and every state tensor of the fused model must match the plain one. 3 rows take the
# small-batch paths of fused.py (skinny products, one-kernel decode time mix; prompts of 1, 6
# and 11 tokens: two passes of prefill_chunk 8, the second one for the longest prompt alone),
# 17 the others (cuBLAS products and the in-place activations; the one-kernel time mix's
# large-batch launch; prompts of 1 to 3 tokens: one padded pass of 51 rows). The 3-row models
# are split-invariant, as served (each pass padded to a multiple of 16 tokens); the 17-row ones
# are not (their pass would be 17 x 16 rows: in the interpreter, most of the test's time)
_INTERPRETED = """
import torch
from server.model.checkpoint import infer_config
from server.model.forward import RWKV7
from server.model.fused import GEMV_MAX_ROWS
from server.model.kernels.decode_triton import SMALL_ROWS
from server.model.random import make_random_state_dict
torch.manual_seed(0)
sd = make_random_state_dict(2, 128, 512, seed=3)
cfg = infer_config(sd)
assert 3 <= min(GEMV_MAX_ROWS, SMALL_ROWS) and 17 > max(GEMV_MAX_ROWS, SMALL_ROWS)
f32, f16 = torch.float32, torch.float16
# (the fp16 3-row case runs products of up to 64 rows through the skinny-product kernel, as
# ``prefill --gemv-rows 64`` does: the 3 prompts' passes of 3 x 8 rows (prefill_chunk 8) in a
# 32-row block; the 17-row cases keep the prefill's products on the plain matmul)
cases = [(f32, f32, 2e-5, 3, 0), (f16, f32, 2e-2, 3, 64), (f16, f32, 2e-2, 17, 0),
         (f16, f16, 2e-2, 17, 0)]
for dt, sdt, tol, rows, gemv_rows in cases:
    models = [RWKV7(sd, cfg, dtype=dt, state_dtype=sdt, prefill_chunk=8, fused=f,
                    split_invariant=rows == 3) for f in (False, True)]
    assert models[1].split_invariant == (rows == 3)
    assert models[1]._fused is not None and models[0]._fused is None
    if gemv_rows:
        models[1]._fused.use_gemv_up_to(gemv_rows)
    lens = [1, 6, 11] if rows == 3 else [1 + i % 3 for i in range(rows)]
    prompts = [[(3 * i + j) % 500 + 1 for j in range(n)] for i, n in enumerate(lens)]
    outs, states = [], []
    for m in models:
        st = m.new_state(rows)
        st.wkv.normal_(generator=torch.Generator().manual_seed(1))
        got = [m.prefill(prompts, st)]
        before = st.select([1])
        active = torch.tensor([i != 1 for i in range(rows)])
        for t in range(2):
            logits = m.decode(torch.arange(rows) + 5 + t, st, active=active)
            got.append(torch.where(active[:, None], logits, 0.0))  # inactive rows: junk
        outs.append(torch.stack(got).float())
        states.append(st)
        after = st.select([1])  # the inactive row is untouched by the decode steps
        assert torch.equal(after.wkv, before.wkv) and torch.equal(after.shift, before.shift)
    scale = outs[0].abs().max()
    err = ((outs[1] - outs[0]).abs().max() / scale).item()
    assert torch.isfinite(outs[1]).all()
    serr = max(((a.float() - b.float()).abs().max() / a.float().abs().max()).item()
               for a, b in ((states[0].wkv, states[1].wkv), (states[0].shift, states[1].shift)))
    print(f"{dt} state {sdt} {rows} rows, gemv up to {gemv_rows or GEMV_MAX_ROWS}: logits rel "
          f"err {err:.2e}, state rel err {serr:.2e}")
    assert err < tol and serr < tol, (err, serr)
print("fused ok")
"""


def test_fused_path_in_interpreter():
    pytest.importorskip("triton")
    out = run_interpreted(_INTERPRETED, timeout=300)
    assert "fused ok" in out.stdout, out.stdout


# decode_triton's one kernel (pre_wkv + WKV step + post_wkv) against the three-kernel path (the
# prefill's kernels at T = 1): the output and the new state, for each state dtype, first/later
# layer, at 5 rows and above SMALL_ROWS (its large-batch launch options), with an inactive row;
# the benchmark variants that load the state first or loop over a row's heads give the same bits
# (in every case on CUDA; in the slow interpreter, in the first case only). In the interpreter
# the rows above SMALL_ROWS run for two of the four (state dtype, layer) cases (each state
# dtype's launch options, each layer's form; all four at 5 rows), and the reference WKV step
# takes a head's 64 value rows a program (each value row's sums as in its default blocks of 16
# or 32 rows: a quarter or half of the programs)
ONE_KERNEL_CHECK = """
import torch
from server.model.kernels import decode_triton as d, fused_triton as f, wkv_triton as w
dev = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator(device=dev).manual_seed(0)
H, N = 11, 64  # 11 heads: two head groups in pre_wkv / post_wkv, the second partly masked
C = H * N
def rnd(*shape, scale=1.0, dtype=torch.float16):
    return (torch.randn(*shape, generator=g, device=dev) * scale).to(dtype)
worst = 0.0
for B in (5, d.SMALL_ROWS + 1):
    for sdt in (torch.float32, torch.float16):
        for first in (True, False):
            if B > d.SMALL_ROWS and dev != "cuda" and first != (sdt == torch.float16):
                continue  # (interpreter) fp32 state later layer, fp16 state first layer
            r, k, v = (rnd(B, C) for _ in range(3))
            lora = rnd(4, B, C)
            vf = None if first else rnd(B, C)
            keep = torch.ones(B, dtype=torch.int8, device=dev)
            keep[1] = 0
            w0, a0, v0 = (rnd(C) for _ in range(3))
            kk, ka, rk, lw, lb = (rnd(C, dtype=torch.float32) for _ in range(5))
            S0 = rnd(B, H, N, N, scale=0.3, dtype=sdt)
            S1, S2, S3 = S0.clone(), S0.clone(), S0.clone()
            wv, kp, vv, kap, a, bonus = f.pre_wkv(r, k, v, lora, vf, keep, w0, a0, v0, kk, ka,
                                                  rk, H)
            y = w.wkv_step_triton(S1, *(t.view(B, H, N) for t in (r, wv, kp, vv, kap, a)),
                                  rows=None if dev == "cuda" else N)
            want = f.post_wkv(y.view(B, C), vv, lora[3], bonus, lw, lb, 1e-5, r.dtype)
            args = (r, k, v, lora, vf, keep, w0, a0, v0, kk, ka, rk, lw, lb, f.DECAY_SCALE, 1e-5)
            got = d.time_mix_decode(S2, *args)
            assert got.dtype == r.dtype and torch.equal(S2[1], S0[1]), "inactive row changed"
            if dev == "cuda" or (B == 5 and sdt == torch.float32 and first):
                early = d.time_mix_decode(S3, *args, EARLY=True)
                assert torch.equal(early, got) and torch.equal(S3, S2), "EARLY changed bits"
                S4 = S0.clone()  # every head of a row in one program, looping over them
                looped = d.time_mix_decode(S4, *args, HEADS=H, STAGES=2)
                assert torch.equal(looped, got) and torch.equal(S4, S2), "HEADS changed bits"
            for name, want_t, have in (("out", want, got), ("S", S1, S2)):
                e = ((have.float() - want_t.float()).abs().max()
                     / want_t.float().abs().max()).item()
                worst = max(worst, e)
                assert e < (2e-3 if sdt == torch.float16 or name == "out" else 1e-5), (
                    B, sdt, first, name, e)
print(f"one kernel ok, worst rel err {worst:.1e}")
"""


def test_one_kernel_decode_in_interpreter():
    pytest.importorskip("triton")
    out = run_interpreted(ONE_KERNEL_CHECK, timeout=300)
    assert "one kernel ok" in out.stdout, out.stdout


_LORA_WIDTHS = """
import torch
from server.model.fused import lora_stacks
from server.model.kernels.fused_triton import lora_act_
from server.model.kernels.gemv_triton import EPI_LORA, gemv
C, R = 96, 5
g = torch.Generator().manual_seed(0)
for dims in ([100, 72, 40, 24], [0, 33, 17, 250], [24, 200, 8, 64]):
    first, second = lora_stacks(dims, C, torch.float32, "cpu")
    w1 = [torch.randn(C, d, generator=g) for d in dims]  # x @ W, as in a checkpoint
    w2 = [torch.randn(d, C, generator=g) for d in dims]
    for i, d in enumerate(dims):
        first[i, :d] = w1[i].t()
        second[i, :, :d] = w2[i].t()
    lim1 = torch.tensor([[d, C] for d in dims], dtype=torch.int32)
    lim2 = torch.tensor([[C, d] for d in dims], dtype=torch.int32)
    xs = torch.randn(4, R, C, generator=g)
    acts = (lambda t: t, torch.tanh, lambda t: t, torch.sigmoid)
    want = torch.stack([acts[i](xs[i] @ w1[i]) @ w2[i] for i in range(4)])
    h = lora_act_(torch.bmm(xs, first.transpose(1, 2)), lim1)  # the batched products' way
    got = torch.bmm(h, second.transpose(1, 2))
    skinny = gemv(gemv(xs, first, epi=EPI_LORA, limits=lim1), second, limits=lim2)
    for out in (got, skinny):
        err = ((out - want).abs().max() / want.abs().max()).item()
        assert err < 1e-5, (dims, err)
print("widths ok")
"""


def test_lora_stacks_give_each_groups_product_at_any_widths_in_interpreter():
    """Widths under the stride, not multiples of 16, a group of width 0 (layer 0's value) and
    the gate not the widest: the batched products over the overlapping stacks (with
    ``lora_act_``'s zeros past each width) and the skinny kernel (its limits) both give each
    group's x @ W1 -> activation -> @ W2."""
    pytest.importorskip("triton")
    out = run_interpreted(_LORA_WIDTHS, timeout=300)
    assert "widths ok" in out.stdout, out.stdout


def test_lora_stacks_overlap_groups_and_keep_each_layers_weights():
    """The LoRA stacks hold 3s + D rows (columns), not 4D: published 2.9B widths (v 64, w 96,
    a 96, g 320) take 608 of 2,560-wide rows instead of 1,280. Each group's view starts s
    after the previous one; a model's stacked layers (layer 0 without a value LoRA) keep
    every LoRA matrix's values, re-pointed into the stacks."""
    from server.model.checkpoint import infer_config
    from server.model.forward import RWKV7
    from server.model.fused import LORA_ORDER, _stack_layer, lora_stacks
    from server.model.random import make_random_state_dict

    first, second = lora_stacks([64, 96, 96, 320], 2560, torch.float16, "cpu")
    assert first.shape == (4, 320, 2560) and second.shape == (4, 2560, 320)
    assert first.untyped_storage().nbytes() == second.untyped_storage().nbytes() == 608 * 2560 * 2
    assert first[1].data_ptr() - first[0].data_ptr() == 96 * 2560 * 2
    assert second[3].data_ptr() - second[0].data_ptr() == 3 * 96 * 2
    sd = make_random_state_dict(2, 128, 512, seed=3)
    model = RWKV7(sd, infer_config(sd), dtype=torch.float32)
    for i, lw in enumerate(model.layers):
        want = {n + k: getattr(lw, n + k).clone() if getattr(lw, n + k) is not None else None
                for n in LORA_ORDER for k in "12"}
        st = _stack_layer(lw)
        widths = [0 if want[n + "1"] is None else want[n + "1"].shape[1] for n in LORA_ORDER]
        assert st.lim1[:, 0].tolist() == widths and (widths[0] == 0) == (i == 0)
        s, D = 32, 64  # C = 128: widths 32, 32, 32 and 64
        assert st.lora1.untyped_storage().nbytes() == (3 * s + D) * 128 * 4
        for g, n in enumerate(LORA_ORDER):
            if want[n + "1"] is None:
                continue
            assert torch.equal(getattr(lw, n + "1"), want[n + "1"])
            assert torch.equal(getattr(lw, n + "2"), want[n + "2"])
            assert getattr(lw, n + "1").untyped_storage().data_ptr() == \
                st.lora1.untyped_storage().data_ptr()
            assert torch.equal(st.lora1[g, :widths[g]], want[n + "1"].t())
            assert torch.equal(st.lora2[g, :, :widths[g]], want[n + "2"].t())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype,state_dtype,tol", [
    (torch.float32, torch.float32, 1e-4),
    (torch.float16, torch.float32, 2e-2),
    (torch.float16, torch.float16, 3e-2),
])
def test_fused_cuda_matches_reference(dtype, state_dtype, tol):
    from model_cases import make_case, rel_err
    from test_model_gpu import run

    from server.model.forward import RWKV7

    case = make_case("c512")
    model = RWKV7(case.sd, case.cfg, device="cuda", dtype=dtype, state_dtype=state_dtype,
                  fused=True)
    assert model._fused is not None
    got = run(model, case)
    err = rel_err(got, case.ref_logits)
    print(f"fused {dtype} state {state_dtype}: rel err {err:.2e}")
    assert torch.isfinite(got).all() and err < tol


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("batch,state_dtype", [
    (3, torch.float32),  # skinny products, one-kernel time mix
    (40, torch.float32),  # cuBLAS, one-kernel time mix (large-batch launch: one warp)
    (40, torch.float16),  # cuBLAS, one-kernel time mix (two warps)
    (300, torch.float16),  # well above SMALL_ROWS
])
def test_fused_cuda_decode_paths_match_fp32(batch, state_dtype):
    """Decode in fp16 through each batch-size path of fused.py against the plain fp32 forward:
    prefill of unequal prompts, then decode steps with one row inactive."""
    from model_cases import make_case

    from server.model.forward import RWKV7

    case = make_case("c512")
    g = torch.Generator().manual_seed(batch)
    V = case.cfg.vocab_size
    prompts = [torch.randint(0, V, (1 + 5 * i % 23,), generator=g).tolist() for i in range(batch)]
    active = torch.ones(batch, dtype=torch.bool)
    active[1] = False
    outs = []
    for dtype, sdt, fused in ((torch.float32, torch.float32, False),
                              (torch.float16, state_dtype, True)):
        model = RWKV7(case.sd, case.cfg, device="cuda", dtype=dtype, state_dtype=sdt,
                      fused=fused)
        state = model.new_state(batch)
        got = [model.prefill(prompts, state)]
        for t in range(4):
            tok = torch.randint(0, V, (batch,), generator=torch.Generator().manual_seed(t))
            got.append(model.decode(tok, state, active=active.cuda()))
        outs.append(torch.stack(got)[:, active].float().cpu())
    err = ((outs[1] - outs[0]).abs().max() / outs[0].abs().max()).item()
    print(f"fused fp16 decode at batch {batch}, state {state_dtype}: rel err {err:.2e}")
    assert torch.isfinite(outs[1]).all() and err < 2e-2


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_pdl_changes_no_bit(monkeypatch):
    """Decode at 3 rows (the PDL chain: ln_mix, skinny products, one-kernel time mix), in CUDA
    graphs and eager, with programmatic dependent launch on and off: the same logits and states
    bit for bit each way (a kernel touching memory before its predecessor is done would
    differ)."""
    from model_cases import make_case

    from server.model.forward import RWKV7
    from server.model.kernels import pdl

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("PDL needs compute capability 9.0")
    case = make_case("c512")
    V, outs = case.cfg.vocab_size, []
    for flag in ("1", "0"):
        monkeypatch.setenv("RWKV_PDL", flag)
        pdl.enabled.cache_clear()
        assert pdl.enabled(torch.device("cuda")) == (flag == "1")
        for graphs in (True, False):
            model = RWKV7(case.sd, case.cfg, device="cuda", dtype=torch.float16,
                          state_dtype=torch.float16, cuda_graphs=graphs, fused=True)
            state = model.new_state(3)
            got = [model.prefill([[1, 2, 3], [4], [5, 6, 7, 8, 9]], state)]
            for t in range(6):
                tok = torch.randint(0, V, (3,), generator=torch.Generator().manual_seed(t))
                got.append(model.decode(tok, state))
            outs.append((torch.stack(got).cpu(), state.wkv.cpu(), state.shift.cpu()))
    pdl.enabled.cache_clear()
    for on, off in ((outs[0], outs[2]), (outs[1], outs[3])):  # graphs, then eager
        assert all(torch.equal(a, b) for a, b in zip(on, off))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_lora_side_stream_changes_no_bit():
    """At 40 rows (cuBLAS products) the LoRA stages run on a second stream beside the r/k/v
    product: prefill and decode steps, in CUDA graphs and eager, give the one-stream logits and
    states bit for bit (a missing fork or join would read a half-written tensor)."""
    from model_cases import make_case

    from server.model.forward import RWKV7

    case = make_case("c512")
    V, outs = case.cfg.vocab_size, {}
    prompts = [[(7 * i + j) % V for j in range(3 + i % 5)] for i in range(40)]
    for graphs in (True, False):
        for side in (True, False):
            model = RWKV7(case.sd, case.cfg, device="cuda", dtype=torch.float16,
                          state_dtype=torch.float16, cuda_graphs=graphs, fused=True)
            model._fused.lora_stream = side
            state = model.new_state(40)
            got = [model.prefill(prompts, state)]
            for t in range(4):
                tok = torch.randint(0, V, (40,), generator=torch.Generator().manual_seed(t))
                got.append(model.decode(tok, state))
            assert hasattr(model._fused._sides, "stream") or not side  # the two-stream form ran
            outs[graphs, side] = (torch.stack(got).cpu(), state.wkv.cpu(), state.shift.cpu())
    for graphs in (True, False):
        on, off = outs[graphs, True], outs[graphs, False]
        assert all(torch.equal(a, b) for a, b in zip(on, off))
    assert not torch.equal(outs[True, True][0][1], outs[True, True][0][2])  # steps differ


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_one_kernel_decode_on_cuda(capsys):
    exec(ONE_KERNEL_CHECK, {})
    assert "one kernel ok" in capsys.readouterr().out


# ln_mix over several column chunks (C = 1100: three programs a row, the last one partial)
# against its torch form, the shift state updated in place: T = 4 (token shift inside the rows;
# the new shift state from a middle row as in a padded prefill, from the last row, and a row
# with write = -1), T = 1, then 70 rows (a program per whole row) as one prompt and as 70
# decode rows (the new shift state is the row's own LayerNorm output, stored as computed)
LN_MIX_CHECK = """
import torch
import torch.nn.functional as F
from server.model.kernels import fused_triton as f
g = torch.Generator().manual_seed(0)
C, M = 1100, 6
lw, lb = torch.randn(C, generator=g), torch.randn(C, generator=g)
mix = torch.rand(M, C, generator=g).half()
for B, T, writes in ((3, 4, [1, -1, 3]), (3, 1, [0, -1, 0]), (1, 70, [69]),
                     (70, 1, [0] * 69 + [-1])):
    x = torch.randn(B * T, C, generator=g) * 3 + 1
    prev = torch.randn(B, C, generator=g).half()
    write = torch.tensor(writes, dtype=torch.int32)
    assert (B * T > f.LN_MIX_SPLIT_ROWS) == (B * T == 70)
    u = F.layer_norm(x, (C,), lw, lb, 1e-5).half().view(B, T, C)
    shifted = torch.cat([prev[:, None], u[:, :-1]], 1)
    want = (u.float() + (shifted.float() - u.float()) * mix.float()[:, None, None]).half()
    want_prev = torch.where((write >= 0)[:, None], u[torch.arange(B), write.clamp(min=0)], prev)
    old_prev = prev.clone()
    new_prev = prev  # updated in place
    got = f.ln_mix(x, lw, lb, prev, new_prev, write, mix, T, 1e-5, torch.float16)
    e = (got.float() - want.view(M, B * T, C).float()).abs().max().item()
    assert e < 2e-2, (B, T, e)
    kept = write < 0  # rows not written keep their bits; the others: LN of row write[b]
    assert torch.equal(new_prev[kept], old_prev[kept]), (B, T, "an unwritten row changed")
    assert torch.allclose(new_prev.float(), want_prev.float(), rtol=2e-3, atol=1e-3), (
        B, T, "shift state", (new_prev.float() - want_prev.float()).abs().max())
print("ln_mix ok")
"""


def test_ln_mix_chunks_in_interpreter():
    pytest.importorskip("triton")
    out = run_interpreted(LN_MIX_CHECK, timeout=300)
    assert "ln_mix ok" in out.stdout, out.stdout


ADD_PARTS_CHECK = """
import torch
from server.model.kernels import fused_triton as f
g = torch.Generator().manual_seed(0)
for K, R, C in ((4, 3, 640), (2, 17, 96)):
    # magnitudes apart, so that the order of the adds shows in the bits
    scale = torch.tensor([1e4, 1.0, 1e-3, 3.0])[:K, None, None]
    parts = torch.randn(K, R, C, generator=g) * scale
    x = torch.randn(R, C, generator=g)
    want = x.clone()
    for p in parts:
        want.add_(p)
    other = x.clone()
    for p in parts.flip(0):
        other.add_(p)
    assert not torch.equal(other, want)  # (the check below can tell the order)
    got = f.add_parts_(x, parts)
    assert got is x and torch.equal(x, want), (K, R, C, (x - want).abs().max())
print("add_parts ok")
"""


def test_add_parts_adds_in_order_in_interpreter():
    """The FFN value's slices (split-invariant prefill) are summed into the residual in one
    launch with the bits of in-place adds one after another."""
    pytest.importorskip("triton")
    out = run_interpreted(ADD_PARTS_CHECK, timeout=120)
    assert "add_parts ok" in out.stdout, out.stdout
