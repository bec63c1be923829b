"""Shrink compaction that MOVES a paused row (slot 3 -> lower) before its forced run is fed."""
from common import *
from server.scheduler.cycle import SlotCycle
real = SlotCycle._resize
hits = []
def spy(self, cap, used):
    moved = [(i, used.index(i)) for i, t in enumerate(self.slots) if t is not None and getattr(t, "_forced_feed", False) and used.index(i) != i]
    if moved: hits.append((self.capacity, cap, moved))
    return real(self, cap, used)
SlotCycle._resize = spy

def alone(i):
    s = DynamicScheduler(L, max_batch_size=8, buffer_size=8)
    t = s.new_task(prompt(i), max_tokens=60, seed=i, presence_penalty=0.5, **SAMPLED)
    t.constraint = Constraint(CALL, L.tokenizer); s.run(); return list(t.output)
refs = {i: alone(i) for i in range(2)}
found = 0
for i in range(2):
    for m in range(1, 25):
        hits.clear()
        s = DynamicScheduler(L, max_batch_size=8, buffer_size=8)
        o = [s.new_task(L.encode(f"User: story {k}\n\nAssistant:"), max_tokens=m, temperature=0.0) for k in range(3)]
        t = s.new_task(prompt(i), max_tokens=60, seed=i, presence_penalty=0.5, **SAMPLED)
        t.constraint = Constraint(CALL, L.tokenizer)
        s.run()
        if hits:
            found += 1
            print(i, m, "moved while paused", hits, "same" if t.output == refs[i] else "DIFFERENT", t.finish_reason)
print("cases", found)
