"""What a fused prefill pass keeps alive (server/model/fused.py): its peak is in the WKV, where
the layer's six mixes are no longer needed and the first layer's value (v_first, read by every
later layer) must not hold the first layer's whole r/k/v product; the channel mix's mix is gone
by its value product. Run through Triton's CPU interpreter, both product paths (the
skinny-product kernel and torch's batched product)."""

import pytest
from model_cases import run_interpreted

_SCRIPT = """
import weakref
import torch
from server.model.checkpoint import infer_config
from server.model.forward import RWKV7
from server.model.kernels import fused_triton
from server.model.random import make_random_state_dict
sd = make_random_state_dict(2, 128, 512, seed=3)
cfg = infer_config(sd)
from server.model.fused import FusedBlocks
mixes, seen = [], []  # the time mix's mixes (weakly); (mixes gone, v_first compact) at pre_wkv
ffn_mixes, ffn_seen = [], []  # the channel mix's; whether gone at the value product
ln_mix, pre_wkv = fused_triton.ln_mix, fused_triton.pre_wkv
add_residual = FusedBlocks._add_residual

def ln_mix_spy(*args, **kwargs):
    out = ln_mix(*args, **kwargs)
    # the time mix's six mixes; the channel mix's one
    (mixes if out.shape[0] == 6 else ffn_mixes).append(weakref.ref(out))
    return out

def pre_wkv_spy(r, k, v, lora, v_first, *rest):
    compact = None if v_first is None else (
        v_first.untyped_storage().nbytes() == v_first.numel() * v_first.element_size())
    seen.append((mixes[-1]() is None, compact))
    return pre_wkv(r, k, v, lora, v_first, *rest)

def add_residual_spy(self, x, inp, weight, name, T):
    if name == "ffn_value":  # the value product: the channel mix's mix is gone by then
        ffn_seen.append(ffn_mixes[-1]() is None)
    return add_residual(self, x, inp, weight, name, T)

fused_triton.ln_mix, fused_triton.pre_wkv = ln_mix_spy, pre_wkv_spy
FusedBlocks._add_residual = add_residual_spy
for rows, gemv_rows in ((3, 64), (17, 0)):
    m = RWKV7(sd, cfg, dtype=torch.float16, state_dtype=torch.float32, prefill_chunk=8,
              fused=True, split_invariant=False)
    if gemv_rows:
        m._fused.use_gemv_up_to(gemv_rows)
    seen.clear()
    ffn_seen.clear()
    m.prefill([[(5 * i + j) % 500 + 1 for j in range(4)] for i in range(rows)], m.new_state(rows))
    assert len(seen) == 2, seen  # one pass, two layers
    assert all(freed for freed, _ in seen), seen
    assert seen[0][1] is None and seen[1][1] is True, seen
    assert ffn_seen == [True, True], ffn_seen
    print(rows, "rows:", seen)
print("memory ok")
"""


def test_prefill_pass_frees_the_mixes_and_keeps_v_first_alone():
    pytest.importorskip("triton")
    out = run_interpreted(_SCRIPT, timeout=300)
    assert "memory ok" in out.stdout, out.stdout
