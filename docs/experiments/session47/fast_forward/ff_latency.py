"""What fast-forward (server/scheduler/guide.py) saves a forced tool call: the reply of a chat
whose tool_choice names a function (the grammar ``tools.forced_call_grammar`` builds, as the
chat route does), through the real scheduler on random weights, with the grammar's forced runs
fed in one pass (on) or decoded a step each (off: ``guide.FF_MIN`` out of reach). Alone and
eight at once; the two alternate, ``--repeat`` rounds; prints the median wall time of a round,
the replies' tokens, the decode steps the scheduler ran and whether both gave the same replies.

    OMP_NUM_THREADS=2 PYTHONPATH=. uv run python docs/experiments/session47/fast_forward/ff_latency.py --preset tiny
    (GPU machine) python3 docs/experiments/session47/fast_forward/ff_latency.py --preset 2.9b --device cuda --dtype fp16
"""
import argparse
import statistics
import time

from server.api.tools import ToolSpec, forced_call_grammar
from server.model.loader import RWKV070ModelLoader
from server.model.random import main as make_random
from server.scheduler import DynamicScheduler
from server.scheduler import guide
from server.task.constraint import Constraint

PARAMS = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
          "properties": {"city": {"type": "string", "maxLength": 12},
                         "unit": {"enum": ["celsius", "fahrenheit"]}}}
CALL = forced_call_grammar([ToolSpec("get_weather", "", PARAMS), ToolSpec("get_time", "", {})],
                           {"type": "function", "function": {"name": "get_weather"}}, lead=">")
FF_MIN = guide.FF_MIN


def run(loader, rows: int, on: bool):
    guide.FF_MIN = FF_MIN if on else 10**9
    guide.FAST_ON_CUDA = on  # (off by default on CUDA since session 47's GPU call: measured here)
    sched = DynamicScheduler(loader, max_batch_size=8, buffer_size=32)
    tasks = []
    for i in range(rows):
        t = sched.new_task(loader.encode(f"User: weather in town {i}?\n\nAssistant: <think>\n"
                                         "</think"), max_tokens=80, temperature=0.0)
        t.constraint = Constraint(CALL, loader.tokenizer)
        tasks.append(t)
    t0 = time.perf_counter()
    sched.run()
    wall = time.perf_counter() - t0
    return wall, tuple(tuple(t.output) for t in tasks), sum(p["steps"] for p in sched.pulses)


ap = argparse.ArgumentParser()
ap.add_argument("--preset", default="tiny")
ap.add_argument("--device", default="cpu")
ap.add_argument("--dtype", default=None)
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--ff-min", type=int, default=guide.FF_MIN, help="guide.FF_MIN for 'on'")
a = ap.parse_args()
FF_MIN = a.ff_min
path = f"/tmp/ff_{a.preset}.pth"
make_random([path, "--preset", a.preset, "--seed", "1", "--force"])
loader = RWKV070ModelLoader(path, device=a.device, dtype=a.dtype)
print(f"preset {a.preset}, {a.device}, FF_MIN {FF_MIN}, medians of {a.repeat} rounds")
print("| rows | fast-forward | wall ms | tokens a reply | decode steps | same replies |")
print("|---|---|---|---|---|---|")
for rows in (1, 8):
    run(loader, rows, True), run(loader, rows, False)  # warm
    got = {True: [], False: []}
    for _ in range(a.repeat):
        for on in (True, False):
            got[on].append(run(loader, rows, on))
    same = {r[1] for r in got[True]} == {r[1] for r in got[False]} and \
        len({r[1] for r in got[True]}) == 1
    for on in (True, False):
        wall = statistics.median(r[0] for r in got[on]) * 1e3
        replies = got[on][0][1]
        per = sum(map(len, replies)) / len(replies)
        print(f"| {rows} | {'on' if on else 'off'} | {wall:.1f} | {per:.1f} | "
              f"{got[on][0][2]} | {same} |")
