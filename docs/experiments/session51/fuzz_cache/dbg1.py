import sys
sys.path.insert(0, "/tmp/fz51_fuzz")
import fuzz as F
seed = int(sys.argv[1])
systems, ops = F.script(seed); cfg = F.cfg_of(seed)
real = F.run_ops
# capture the Sides
import fuzz
keep = {}
OrigSide = F.Side
class S(OrigSide):
    def __init__(self, cfg, cached):
        super().__init__(cfg, cached); keep["A" if cached else "B"] = self
F.Side = S
diffs, st = F.run_ops(systems, ops, cfg)
for d in diffs:
    tid = d[0]
    a, b = keep["A"].res[tid], keep["B"].res[tid]
    print(tid, "tokens equal", a[0] == b[0])
    for i, (x, y) in enumerate(zip(a[2], b[2])):
        if x != y: print("  pos", i, "\n   A", x, "\n   B", y)
    t = keep["A"].objs[tid]
    print("  logprobs", t.logprobs, "bias", t.logit_bias, "temp", t.temperature, "pp", t.presence_penalty, t.repetition_penalty, t.penalty_decay)
