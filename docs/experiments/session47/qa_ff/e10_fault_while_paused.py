"""A fault in the pass that feeds a forced run (row paused): tasks fail with the error, the
scheduler goes on, and a later forced call replies as it does alone."""
from common import *
from server.scheduler.prefill import Prefiller

def ref():
    s = DynamicScheduler(L, max_batch_size=4, buffer_size=8)
    t = s.new_task(prompt(7), max_tokens=60, seed=7, presence_penalty=0.5, **SAMPLED)
    t.constraint = Constraint(CALL, L.tokenizer); s.run(); return list(t.output)

R = ref()
real = Prefiller._feed
boom = [True]
def feed(self, plan, mid=()):
    if boom[0] and any(getattr(t, "_forced_feed", False) for _, t, _, _ in plan):
        boom[0] = False
        raise RuntimeError("injected fault feeding a forced run")
    return real(self, plan, mid)
Prefiller._feed = feed

s = DynamicScheduler(L, max_batch_size=4, buffer_size=8)
a = s.new_task(prompt(1), max_tokens=60, seed=1, **SAMPLED); a.constraint = Constraint(CALL, L.tokenizer)
b = s.new_task(L.encode("User: hi\n\nAssistant:"), max_tokens=30, temperature=0.0)
s.run()
print("a:", a.finish_reason, a.error, "history back to admission:", len(a.history), "pending", len(a.pending), "forced flag", getattr(a, "_forced_feed", None))
print("b:", b.finish_reason, b.error)
t = s.new_task(prompt(7), max_tokens=60, seed=7, presence_penalty=0.5, **SAMPLED)
t.constraint = Constraint(CALL, L.tokenizer); s.run()
print("after fault: same as alone:", list(t.output) == R, t.finish_reason, "slots", s.slots, "num_active", s.num_active)
