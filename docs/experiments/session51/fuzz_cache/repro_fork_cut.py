"""Cache OFF on both runs: does F13's (a fork continued after decoded tokens) final state depend on
a long prompt sharing its prefill steps (prefill_chunk 45)? Same F13 outputs compared too."""
import sys; sys.path.insert(0, "/tmp/fz51_fuzz"); import fuzz as F
from server.scheduler import DynamicScheduler
from server.task.task import Task
from server.task.cache_origin import origin_of, state_digest
systems, ops = F.script(1016); byid = {op[1]: op for op in ops}; L = F.L
def run(with_other):
    s = DynamicScheduler(L, max_batch_size=16, buffer_size=2, prefill_chunk=45)
    _, _, sysi, ut, mt, d = byid["P3"]
    p = Task(L.encode(f"System: {systems[sysi]}\n\nUser: {ut}\n\nAssistant:"), max_tokens=mt, **d); p.cache_origin = ""
    s.add_task(p)
    while s.has_work: s.step()
    src = p
    for tid in ("F4", "F13"):
        _, _, _, ut, mt, d = byid[tid]
        f = src.fork(tid); f.cache_origin = origin_of(src); f.continue_gen(L.encode(ut), max_tokens=mt, **d)
        if with_other and tid == "F13":
            o = Task(L.encode(systems[0]), max_tokens=1, temperature=0.0); o.cache_origin = ""; s.add_task(o)
        s.add_task(f)
        while s.has_work: s.step()
        src = f
    return src
a, b = run(False), run(True)
print("F13 pending-start", len(a.history) - len(a.output), "outputs equal", a.output == b.output, "state equal", state_digest(a.state) == state_digest(b.state))
