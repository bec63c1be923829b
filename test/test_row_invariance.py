"""row_invariance: the forms of the prefill's products chosen so that a row keeps its bits at
every row count (split-invariant prefill on CUDA; the real products are checked on the GPU:
test_split_invariance_gpu.py). Here a stand-in for the fused blocks whose products change a
row's bits for few rows, as cuBLAS's split K does, unless run over enough slices."""

from types import SimpleNamespace

import torch

from server.model import row_invariance


class Blocks:
    """A FusedBlocks stand-in: ``split[name]``: slices below which a residual product rounds
    otherwise at fewer than 64 rows (None: at any slices); ``lora_splits``: the LoRA stages do."""

    def __init__(self, split: dict, lora_splits: bool = False, C: int = 64):
        g = torch.Generator().manual_seed(0)
        w = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
        lw = SimpleNamespace(wo=w(C, C), ffn_value=w(C, 4 * C), ffn_key=w(4 * C, C))
        self.model = SimpleNamespace(layers=[lw], prefill_chunk=200, prefill_align=16,
                                     device=torch.device("cpu"),
                                     dtype=torch.float32)
        self.stacks = [SimpleNamespace(rkv=w(3, C, C))]
        self.split, self.lora_splits, self.calls = split, lora_splits, []
        self.names = {id(lw.wo): "output", id(lw.ffn_value): "ffn_value"}

    def _lora(self, xs, st):
        out = xs[2:6] * 2
        return out + 1e-3 if self.lora_splits and xs.shape[1] < 64 else out

    def _add_sliced(self, out, t, w, s):
        name = self.names[id(w)]
        self.calls.append((name, s))
        out += t @ w.t()
        need = self.split[name]
        if t.shape[0] < 64 and (need is None or s < need):
            out += 1e-3  # other bits for few rows


def test_fewest_slices_that_keep_every_row():
    blocks = Blocks({"output": 2, "ffn_value": 4})
    assert row_invariance.choose_slices(blocks) == {"output": 2, "ffn_value": 4}
    tried = {name: sorted({s for n, s in blocks.calls if n == name}) for name in blocks.names.values()}
    assert tried == {"output": [1, 2], "ffn_value": [1, 2, 4]}  # the fewest first
    assert row_invariance.choose_slices(Blocks({"output": 1, "ffn_value": 1})) == {
        "output": 1, "ffn_value": 1}


def test_no_form_found_means_no_split_invariance():
    assert row_invariance.choose_slices(Blocks({"output": None, "ffn_value": 1})) is None
    assert row_invariance.choose_slices(Blocks({"output": 1, "ffn_value": 1},
                                               lora_splits=True)) is None


def test_same_rows_compares_every_multiple_of_the_step():
    x = torch.randn(100, 8)
    assert row_invariance.same_rows(lambda t: t * 3, x)
    seen = []
    row_invariance.same_rows(lambda t: seen.append(t.shape[0]) or t, x)
    assert seen == [100, 16, 32, 48, 64, 80, 96]
    assert not row_invariance.same_rows(lambda t: t + (t.shape[0] == 48), x)


def test_the_fused_blocks_choose_once_and_say_when_they_cannot():
    """``FusedBlocks.check_split_invariance``: the choice is made once; without fp32-output
    products (an older torch) or without a form that keeps the bits it says no (the model then
    prefills without split invariance, with a warning)."""
    from server.model.fused import FusedBlocks

    blocks = Blocks({"output": 2, "ffn_value": 1})
    blocks.slices, blocks.f32_out = None, True
    assert FusedBlocks.check_split_invariance(blocks)
    assert blocks.slices == {"output": 2, "ffn_value": 1}
    n = len(blocks.calls)
    assert FusedBlocks.check_split_invariance(blocks) and len(blocks.calls) == n  # not again
    for f32_out, split in ((False, {"output": 1, "ffn_value": 1}),
                           (True, {"output": None, "ffn_value": 1})):
        blocks = Blocks(split)
        blocks.slices, blocks.f32_out = None, f32_out
        assert not FusedBlocks.check_split_invariance(blocks) and blocks.slices == {}
        assert not FusedBlocks.check_split_invariance(blocks)


def _tiny_model(**kw):
    from server.model.checkpoint import infer_config
    from server.model.forward import RWKV7
    from server.model.random import make_random_state_dict

    sd = make_random_state_dict(2, 128, 512, seed=3)
    return RWKV7(sd, infer_config(sd), **kw)


def test_the_plain_forward_chooses_its_products_slices(monkeypatch):
    """The plain forward (the CPU) chooses a form of each product that keeps a row's bits at
    every multiple of 32 rows: on this machine the tiny model's products as they are; with a
    BLAS stand-in whose ``F.linear`` changes rows below 64, two slices of K for those (then a
    batched product), and the model stays split-invariant, its outputs the same (to rounding);
    when the batched product changes rows too, no form: no split invariance."""
    model = _tiny_model()
    assert model.split_invariant and set(model._slices.values()) == {1}
    tokens = [[(7 * i) % 500 + 1 for i in range(70)]]
    want = model.new_state(1)
    model.prefill(tokens, want, logits=False)
    real_linear, real_bmm = torch.nn.functional.linear, torch.bmm

    def few_rows_otherwise(fn):
        def wrapped(x, w):
            out = fn(x, w)
            return out + 1e-3 if x.shape[-2] < 64 else out
        return wrapped

    monkeypatch.setattr(row_invariance.F, "linear", few_rows_otherwise(real_linear))
    model = _tiny_model()
    assert model.split_invariant
    assert {n: s for n, s in model._slices.items() if s > 1} == {
        n: 2 for n in row_invariance.LINEAR}
    got = model.new_state(1)
    model.prefill(tokens, got, logits=False)  # (the state: the head's product is not sliced)
    assert torch.allclose(got.wkv, want.wkv, rtol=1e-4, atol=1e-5)
    assert torch.allclose(got.shift, want.shift, rtol=1e-4, atol=1e-5)
    # half-precision weights: only the whole product (parts would be rounded before the sum)
    assert not _tiny_model(dtype=torch.bfloat16).split_invariant
    monkeypatch.setattr(row_invariance.torch, "bmm", few_rows_otherwise(real_bmm))
    model = _tiny_model()
    assert row_invariance.plain_slices(model) is None and not model.split_invariant
    assert not _tiny_model(split_invariant=False).split_invariant


def test_a_product_over_slices_is_the_product():
    """``product`` over 1, 2 or 4 slices of K: the same values (to fp32 rounding) for both
    weight layouts and for 2-D and 3-D inputs, in the input's dtype."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 5, 64, generator=g)
    w_lin, w_mat = torch.randn(24, 64, generator=g), torch.randn(64, 24, generator=g)
    for w, linear in ((w_lin, True), (w_mat, False)):
        want = x @ (w.t() if linear else w)
        for s in (1, 2, 4):
            for inp in (x, x.reshape(10, 64)):
                got = row_invariance.product(inp, w, linear, s)
                assert got.shape == (*inp.shape[:-1], 24) and got.dtype == inp.dtype
                assert torch.allclose(got, want.reshape(got.shape), rtol=1e-5, atol=1e-5), s
