import sys; sys.path.insert(0, "/tmp/fz51")
import torch; torch.set_num_threads(1)
from server.model.loader import RWKV070ModelLoader
from server.model.state import State
L = RWKV070ModelLoader("/tmp/fz51_fuzz/tiny.pth", device="cpu"); M = L.model
g = torch.Generator().manual_seed(0)
prompts = [[int(x) for x in torch.randint(0, 65536, (n,), generator=g)] for n in (40, 70, 100, 20, 33, 64, 90, 10, 50, 60, 70, 80, 90, 11, 12, 13)]
sts = []
for p in prompts:
    s = M.new_state(1); M.prefill([p], s, logits=False); sts.append(s)
def batch(rows):
    return State(torch.cat([sts[i].shift for i in rows], 2).clone(), torch.cat([sts[i].wkv for i in rows], 1).clone())
ref_st = batch([0]); ref = M.decode(torch.tensor([123]), ref_st)
for n in (2, 3, 4, 5, 8, 16):
    st = batch(list(range(n))); lg = M.decode(torch.tensor([123] * n), st)
    print(n, "logits row0 equal", torch.equal(lg[0], ref[0]), "maxdiff", (lg[0] - ref[0]).abs().max().item(),
          "state equal", torch.equal(st.wkv[:, :1], ref_st.wkv) and torch.equal(st.shift[:, :, :1], ref_st.shift))
