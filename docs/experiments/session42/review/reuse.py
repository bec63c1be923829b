"""Session 42's review: after a round that ends at end-of-text, is the next round's first draw
fair? 256 rows, two equally likely tokens (0 = end-of-text, and 300): every row ends at EOS in
the pulse; then two equally likely tokens 300 / 400 for one draw each. A draw that reuses the
ending draw's uniform picks 300 every time.
usage: python reuse.py TREE   (a checkout of the commit to test; default: the cwd)"""
import os
import sys
import tempfile

root = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
sys.path.insert(0, root)
import torch  # noqa: E402

from server.bench.common import DummyTask  # noqa: E402
from server.model.loader import RWKV070ModelLoader  # noqa: E402
from server.model.random import PRESETS, make_random_state_dict  # noqa: E402
from server.scheduler.engine import REASON_EOS, BatchEngine  # noqa: E402

path = os.path.join(tempfile.mkdtemp(), "tiny.pth")
torch.save(make_random_state_dict(*PRESETS["tiny"]), path)
model = RWKV070ModelLoader(path, device="cpu").model
V = model.cfg.vocab_size
cands = [(0, 300)]


def decode(cur, state, active=None, borrow=False):
    lg = torch.full((cur.shape[0], V), -1e4)
    a, b = cands[0]
    lg[:, a] = 0.0
    lg[:, b] = 0.0
    return lg


model.decode = decode
N = 256
eng = BatchEngine(model)
eng.resize(N, [])
tasks = [DummyTask(temperature=1.0, top_k=0, top_p=1.0, seed=1000 + i, presence_penalty=0.0,
                   repetition_penalty=0.0, penalty_decay=1.0) for i in range(N)]
eng.load(list(range(N)), tasks)
eng.start(list(range(N)), [5] * N, [100] * N)
r = eng.pulse(12)
ended = [i for i in range(N) if r.reason[i] == REASON_EOS]
cands[0] = (300, 400)
eng.free(list(range(N)))
eng.start(ended, [7] * len(ended), [1] * len(ended))
r2 = eng.pulse(1)
firsts = [r2.tokens[i][0] for i in ended]
print(f"ended by EOS: {len(ended)} of {N}; next round's first token: 300 x {firsts.count(300)}, "
      f"400 x {firsts.count(400)} (fair: ~50/50)")
