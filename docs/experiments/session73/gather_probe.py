"""How many of a load's batched-prefill rows are gathered (copied) rather than fed in place
(``State.select``, by calling line), on the CPU with the tiny model: 64 prompts of 67-691
tokens at once, as ``server.bench memory --load``'s. Session 73 ran it at HEAD and with the
admission handing free slots out longest prompt first (not kept: no fewer gathered rows).
    PYTHONPATH=. uv run python docs/experiments/session73/gather_probe.py [SEED]
"""
import os
import random
import sys
import traceback

from server.model import state as state_mod
from server.model.loader import RWKV070ModelLoader
from server.model.random import main as make_random
from server.scheduler.dynamic import DynamicScheduler


TINY = "/tmp/gather_probe_tiny.pth"
if not os.path.exists(TINY):
    make_random([TINY, "--preset", "tiny", "--seed", "1"])
gathered = []
orig = state_mod.State.select


def select(self, idx):
    frames = [f for f in traceback.extract_stack()[:-1] if "/server/" in f.filename]
    caller = frames[-1]
    gathered.append((caller.filename.split("/")[-1], caller.lineno, len(list(idx))))
    return orig(self, idx)


state_mod.State.select = select
loader = RWKV070ModelLoader(TINY, device="cpu")
sched = DynamicScheduler(loader, max_batch_size=64, buffer_size=4)
sched.start_daemon()
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
tasks = [sched.new_task(prompt=[rng.randrange(100, 60000) for _ in range(rng.randrange(67, 692))],
                        max_tokens=2) for _ in range(64)]
assert all(t.wait(300) for t in tasks)
sched.shutdown()
from collections import Counter
print(Counter((g[0], g[1]) for g in gathered), Counter(g[2] for g in gathered))
print(f"gathers: {len(gathered)} calls, {sum(g[2] for g in gathered)} rows: {gathered}")
