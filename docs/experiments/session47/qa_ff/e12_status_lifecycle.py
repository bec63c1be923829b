"""What a reader (Task API GET /status, TaskInfo.status) sees during a fast-forwarded reply:
the status goes back to PREFILL (0) mid-reply after it was RUNNING (2)."""
from common import *
s = DynamicScheduler(L, max_batch_size=2, buffer_size=8)
t = s.new_task(prompt(3), max_tokens=60, temperature=0.0)
t.constraint = Constraint(CALL, L.tokenizer)
seen = []
t.subscribe(lambda task: seen.append((len(task.output), task.status.name)))
s.run()
trans = [seen[0]] + [b for a, b in zip(seen, seen[1:]) if a[1] != b[1]]
print("status transitions (tokens so far, status):", trans)
