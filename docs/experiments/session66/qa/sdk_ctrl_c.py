"""README: Ctrl-C during run() ends the tasks then in slots with an error naming it, back to
their own state, re-raises; queued tasks run at the next run(). A timer sends SIGINT to itself.
    RWKV_TASK_DB_PATH=/tmp/qa66/sdk/cc.db uv run python docs/experiments/session66/qa/sdk_ctrl_c.py
"""
import os, signal, sys, threading, time
sys.path.insert(0, os.getcwd())
from server import RWKV070ModelLoader, DynamicScheduler

loader = RWKV070ModelLoader("/tmp/qa66/sdk/model.pth")
s = DynamicScheduler(loader, max_batch_size=2, buffer_size=8)
tasks = [s.new_task(f"q{i}", max_tokens=3000 if i < 2 else 20, temperature=0) for i in range(6)]
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    s.run(); print("run() returned without KeyboardInterrupt")
except KeyboardInterrupt:
    print("KeyboardInterrupt re-raised")
for t in tasks:
    print("  ", t.status.name, t.finish_reason, str(t.error)[:80], len(t.round_tokens()))
t0 = time.time(); s.run(); print(f"second run(): {time.time()-t0:.2f}s")
for t in tasks:
    print("  ", t.status.name, t.finish_reason, len(t.round_tokens()))
t = tasks[0]
t.continue_gen(" more", max_tokens=5); s.add_task(t); s.run()
print("continue after interrupt:", t.finish_reason, len(t.round_tokens()))
