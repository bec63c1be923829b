from common import loader
from server.scheduler import DynamicScheduler
from server.task.task import Task
L = loader()
print(L.model.split_invariant, L.model.prefill_align)
def alone(toks, **kw):
    s = DynamicScheduler(L, max_batch_size=1, buffer_size=4)
    t = Task(toks, **kw); s.add_task(t); s.run(); return t.output
kw = dict(max_tokens=20, temperature=1.0, top_p=1.0, top_k=0, seed=5)
a = alone([1,2,3,4,5], **kw)
s = DynamicScheduler(L, max_batch_size=8, buffer_size=4)
ts = [Task([1,2,3,4,5], **kw)] + [Task(list(range(10+i, 30+i)), max_tokens=15, temperature=0.8, seed=i) for i in range(5)]
for t in ts: s.add_task(t)
s.run()
print(a); print(ts[0].output, a == ts[0].output)
