"""Session 50: where a prompt's bits part when other prompts share its prefill pass on CUDA
(fused fp16 path, two layers of the 2.9B width; GPU call 2). For B prompts (the first 40 tokens,
the others 20, or all 48), row 0's state and first logits against the prompt alone, and the head
alone on the same residual rows (1 row against B rows).

    python3 docs/experiments/session50/beside.py
"""
import torch

from server.model.checkpoint import infer_config
from server.model.forward import RWKV7
from server.model.random import make_random_state_dict

sd = make_random_state_dict(2, 2560, dtype=torch.float16, device="cuda")
model = RWKV7(sd, infer_config(sd), device="cuda", dtype=torch.float16)
print("split_invariant", model.split_invariant, "align", model.prefill_align,
      "gemv_rows", model._fused.gemv_rows, "slices", model._fused.slices)
gen = torch.Generator().manual_seed(3)


def toks(n):
    return torch.randint(300, 60000, (n,), generator=gen).tolist()


def diff(a, b):
    return float((a.float() - b.float()).abs().max())


for label, la, lo in (("40+20s", 40, 20), ("48s", 48, 48), ("32s", 32, 32)):
    a = toks(la)
    others = [toks(lo) for _ in range(40)]
    s1 = model.new_state(1)
    l1 = model.prefill([a], s1)
    for B in (2, 3, 4, 5, 8, 16, 17):
        sB = model.new_state(B)
        lB = model.prefill([a, *others[:B - 1]], sB)
        wkv = [diff(sB.wkv[i, 0], s1.wkv[i, 0]) for i in range(2)]
        shift = diff(sB.shift[:, :, 0], s1.shift[:, :, 0])
        print(f"{label} B={B:2d}: logits {diff(lB[0], l1[0]):.2e}  wkv L0 {wkv[0]:.2e} "
              f"L1 {wkv[1]:.2e}  shift {shift:.2e}")
# the head alone: the same residual rows, 1 row against B rows
x = torch.randn(17, 2560, device="cuda")
one = model._logits(x[:1])
for B in (2, 3, 4, 5, 8, 16, 17):
    print(f"head, {B} rows: row 0 {diff(model._logits(x[:B])[0], one[0]):.2e}")
print("done")
