import torch
from common import loader
L = loader(); m = L.model
torch.manual_seed(0)
for B in (2, 3, 4, 8):
    st = m.new_state(B)
    st.wkv.normal_(); st.shift.normal_()
    cur = torch.randint(1, 65536, (B,))
    full = m.decode(cur, st.clone(), active=torch.ones(B, dtype=torch.bool)).clone()
    diffs = []
    for r in range(B):
        s1 = st.select([r])
        one = m.decode(cur[r:r+1], s1, active=torch.ones(1, dtype=torch.bool))
        diffs.append((one[0] != full[r]).sum().item())
    print(B, diffs)
