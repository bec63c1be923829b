import sys
sys.path.insert(0, "/tmp/fz51_fuzz")
import fuzz as F
from server.task.cache_origin import state_digest
seed = int(sys.argv[1])
systems, ops = F.script(seed); cfg = F.cfg_of(seed)
keep = {}
class S(F.Side):
    def __init__(self, cfg, cached):
        super().__init__(cfg, cached); keep["A" if cached else "B"] = self
F.Side = S
diffs, st = F.run_ops(systems, ops, cfg)
A, B = keep["A"], keep["B"]
for d in diffs:
    tid = d[0]
    ta, tb = A.objs[tid], B.objs[tid]
    print(tid, d[1:], "snap A/B", A.res[tid][3], B.res[tid][3], "now A/B", state_digest(ta.state), state_digest(tb.state),
          "outputs", len(ta.output), ta.finish_reason, "hist", len(ta.history), len(tb.history), ta.history == tb.history)
    for op in ops:
        if op[1] == tid: print("  op", op[:3], op[4:])
