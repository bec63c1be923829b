"""Five 40-token prompts kept in flight beside one 600-token prompt (prefill_chunk 64): steps
until the long one's first token (capped at 400). Written by session 40's review helper.
"""
import random, sys, time
from server.model.random import main as make_random
from server.model.loader import RWKV070ModelLoader
from server.scheduler import DynamicScheduler
import os
path = "/tmp/review40/tiny.pth"
if not os.path.exists(path):
    make_random([path, "--preset", "tiny", "--seed", "1"])
loader = RWKV070ModelLoader(path, device="cpu")
rnd = random.Random(0)
sched = DynamicScheduler(loader, max_batch_size=8, buffer_size=4, prefill_chunk=64)
# two shorts first so the long one isn't slot 0 necessarily
shorts = [sched.new_task([rnd.randrange(1000, 60000) for _ in range(40)], max_tokens=2, temperature=0) for _ in range(2)]
long = sched.new_task([rnd.randrange(1000, 60000) for _ in range(600)], max_tokens=2, temperature=0)
steps = 0
while not long.output and steps < 400:
    live = [t for t in shorts if not t.is_finished]
    while len(live) < 5:
        t = sched.new_task([rnd.randrange(1000, 60000) for _ in range(40)], max_tokens=2, temperature=0)
        shorts.append(t); live.append(t)
    sched.step(); steps += 1
print("steps until long's first token:", steps, "long history", len(long.history), "shorts served", sum(bool(t.output) for t in shorts))
sched.shutdown()
