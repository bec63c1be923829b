"""Session 59: device memory allocated after each of three CUDA models (graphs captured) is
made, used and dropped in turn (no gc.collect): a per-model leak grows, a one-time cost
(library workspaces on new streams) does not."""
import sys

import torch

sys.path.insert(0, "test")
from model_cases import make_case  # noqa: E402
from server.model.forward import RWKV7  # noqa: E402

case = make_case("c512", with_reference=False)
torch.cuda.synchronize()
base = torch.cuda.memory_allocated()
for i in range(3):
    model = RWKV7(case.sd, case.cfg, device="cuda")
    state = model.new_state(2)
    model.prefill([[1, 2, 3]], model.new_state(1))
    model.decode(torch.tensor([5, 6], device="cuda"), state)
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - base
    del model, state
    torch.cuda.synchronize()
    print(f"model {i}: in use {held}, after its drop {torch.cuda.memory_allocated() - base}")
