"""Guide is built for every slot with a constraint, also one still being prefilled (not
decoding): the pulse then computes its masks and waits for the device each step (CUDA) for a
row that takes no token (docstring: 'a pulse without [a constrained row] never does')."""
from common import loader
L = loader()
import server.scheduler.engine as E
from server.scheduler import DynamicScheduler
from server.task.constraint import Constraint, json_grammar
log = []
orig = E.Guide.__init__
def spy(self, constraints, *a, **k):
    orig(self, constraints, *a, **k)
    log.append((sorted(constraints), sorted(sched.decoding)))
E.Guide.__init__ = spy
sched = DynamicScheduler(L, max_batch_size=2, buffer_size=4)
free = sched.new_task(L.encode("hello"), max_tokens=40, temperature=0)
long = sched.new_task([5 + (i % 1000) for i in range(4000)], max_tokens=4, temperature=0)
long.constraint = Constraint(json_grammar(None), L.tokenizer)
sched.run()
idle = [(c, d) for c, d in log if not set(c) <= set(d)]
print(f"Guides built: {len(log)}; with a constrained slot not decoding: {len(idle)}; e.g. {idle[:3]}")
print("constrained reply:", repr(L.decode(long.output)), long.finish_reason)
