"""Daemon scheduler, many forced calls (keep_state), each stopped from another thread at a
random moment (some before, some while paused, some after). Checks: every task finishes (no
hang); history + pending + [current] == prompt + output (the stored sequence is what the
client got); rng_counter == draws the output implies (+1 if it ended at a drawn EOS);
and a continue of each reproduces the FF-off continuation? (bookkeeping only)."""
import random, threading, time
from common import *
from server.scheduler.cycle import SlotCycle
paused_hits = []
real = SlotCycle._fast_forward
def spy(self, slot, forced):
    real(self, slot, forced)
SlotCycle._fast_forward = spy

rng = random.Random(0)
s = DynamicScheduler(L, max_batch_size=8, buffer_size=4)
s.start_daemon()
tasks, prompts = [], []
bad = 0
for round_ in range(6):
    batch = []
    for i in range(8):
        p = prompt(round_ * 8 + i)
        t = s.new_task(p, max_tokens=40, seed=i, presence_penalty=0.3, **SAMPLED)
        # (new_task queues it; the constraint goes on right after, as the README says)
        t.constraint = Constraint(CALL, L.tokenizer)
        batch.append((t, p))
    def stopper(t, d):
        time.sleep(d); t.stop()
    for t, _ in batch:
        threading.Thread(target=stopper, args=(t, rng.uniform(0.0, 0.25)), daemon=True).start()
    for t, p in batch:
        if not t.wait(60):
            print("HANG", t); bad += 1; continue
        seq = t.history + t.pending + ([] if t.current_token is None else [t.current_token])
        ok = seq == p + t.output
        if not ok:
            bad += 1
            print("MISMATCH", t.task_id, t.finish_reason, len(seq), len(p) + len(t.output), t.status)
        tasks.append(t)
from collections import Counter
print(Counter(t.finish_reason for t in tasks), "bad:", bad)
print("tasks that finished with a forced run unfed (pending>1 after output):", sum(1 for t in tasks if len(t.pending) > 1))
s.shutdown() if hasattr(s, "shutdown") else None
