"""Session 59: what stays allocated on the device after a CUDA model (graphs captured) is
dropped: memory before / after the drop / after gc.collect(), then the live CUDA tensors
(size, shape, the types of their referrers)."""
import gc
import sys

import torch

sys.path.insert(0, "test")
from model_cases import make_case  # noqa: E402
from server.model.forward import RWKV7  # noqa: E402

case = make_case("c512", with_reference=False)
torch.cuda.synchronize()
base = torch.cuda.memory_allocated()
ids_before = {id(o) for o in gc.get_objects() if torch.is_tensor(o) and o.is_cuda}
model = RWKV7(case.sd, case.cfg, device="cuda")
state = model.new_state(2)
model.prefill([[1, 2, 3]], model.new_state(1))
model.decode(torch.tensor([5, 6], device="cuda"), state)
torch.cuda.synchronize()
held = torch.cuda.memory_allocated() - base
gc.disable()
del model, state
torch.cuda.synchronize()
after = torch.cuda.memory_allocated() - base
gc.enable()
gc.collect()
torch.cuda.synchronize()
after_gc = torch.cuda.memory_allocated() - base
print(f"held {held} after drop {after} after gc {after_gc}")
live = [o for o in gc.get_objects() if torch.is_tensor(o) and o.is_cuda and id(o) not in ids_before]
live.sort(key=lambda t: -t.untyped_storage().nbytes())
print(f"{len(live)} live CUDA tensors made since")
for t in live[:25]:
    refs = [type(r).__name__ + (f"({sorted(r)[:6]})" if isinstance(r, dict) else "")
            for r in gc.get_referrers(t) if r is not live]
    print(t.untyped_storage().nbytes(), tuple(t.shape), t.dtype, refs[:4])
