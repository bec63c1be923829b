"""Isolated repro: a task given a constraint that is not a Constraint (SDK, no HTTP) is accepted
by new_task / add_task and then fails the whole pulse, other tasks included.
    RWKV_TASK_DB_PATH=/tmp/qa66/sdk/c.db uv run python docs/experiments/session66/qa/sdk_constraint_type.py
"""
import os, sys
sys.path.insert(0, os.getcwd())
from server import RWKV070ModelLoader, DynamicScheduler, Task

loader = RWKV070ModelLoader("/tmp/qa66/sdk/model.pth")
s = DynamicScheduler(loader, max_batch_size=4, buffer_size=8)
good = [s.new_task(f"User: q{i}\n\nAssistant:", max_tokens=40, temperature=0) for i in range(2)]
s.run()
ref = [g.round_tokens() for g in good]
good = [s.new_task(f"User: q{i}\n\nAssistant:", max_tokens=40, temperature=0) for i in range(2)]
try:
    bad = s.new_task("User: hi\n\nAssistant:", max_tokens=40, constraint={"type": "json_object"})
    print("new_task accepted constraint=dict")
except Exception as e:
    print("new_task refused:", type(e).__name__, e); bad = None
t = Task(loader.encode("User: x\n\nAssistant:"), max_tokens=40)
t.constraint = "json"
try:
    s.add_task(t); print("add_task accepted task.constraint='json'")
except Exception as e:
    print("add_task refused:", type(e).__name__, e)
s.run()
for i, g in enumerate(good):
    print(f"innocent task {i}: finish={g.finish_reason} error={g.error!s:.80} tokens={len(g.round_tokens())} "
          f"same as alone={g.round_tokens() == ref[i]}")
if bad is not None:
    print("bad task:", bad.finish_reason, str(bad.error)[:80])
