import sys; sys.path.insert(0, "/tmp/fz51_fuzz"); import fuzz as F
systems, ops = F.script(1016)
for op in ops:
    if op[0] in ("ptask", "fork", "cont"): print(op[0], op[1], op[2], len(op[3]), op[4], op[5] if len(op) > 5 else "")
