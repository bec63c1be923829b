"""Fast-forward of a forced tool call's reply (server/scheduler/guide.py) timed as a server runs
it (session 48): one daemon scheduler kept for every round (session 47's ff_latency.py made a
scheduler a round: a new engine captures its decode graphs again, 76-118 ms at batch 1 on the
H200 in this session's gpu_call1 logs, inside the timed run), warmed by two rounds of each
kind first. Rounds of 1 and 8 rows alternate on/off; the wall time is from the first task
added to the last finished.

    OMP_NUM_THREADS=2 PYTHONPATH=. uv run python docs/experiments/session48/ff_daemon.py \\
        --preset tiny
    (GPU machine) python3 docs/experiments/session48/ff_daemon.py --preset 2.9b \\
        --device cuda --dtype fp16
"""
import argparse
import statistics
import time

from server.model.loader import RWKV070ModelLoader
from server.api.lifecycle import demo_state_dict
from server.model.loader import parse_device
from server.scheduler import DynamicScheduler, guide
from server.task.constraint import Constraint

from server.api.tools import ToolSpec, forced_call_grammar

PARAMS = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
          "properties": {"city": {"type": "string", "maxLength": 12},
                         "unit": {"enum": ["celsius", "fahrenheit"]}}}
# the forced call of session 47's ff_latency.py
CALL = forced_call_grammar([ToolSpec("get_weather", "", PARAMS), ToolSpec("get_time", "", {})],
                           {"type": "function", "function": {"name": "get_weather"}}, lead=">")

ap = argparse.ArgumentParser()
ap.add_argument("--preset", default="tiny")
ap.add_argument("--device", default="cpu")
ap.add_argument("--dtype", default=None)
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--grouped", type=int, default=0, help="1: fed runs of several rows share an "
                "eager pass as before session 48 (RWKV7.graphed_prefill taken as False)")
ap.add_argument("--free", type=int, default=0, help="N: each round also runs N unconstrained "
                "greedy rows of 64 tokens beside one forced call (the tax a fed run's pass puts "
                "on rows decoding beside it); reports both finish times")
a = ap.parse_args()
FF_MIN = guide.FF_MIN
# random weights drawn on the device as ``run.py --demo`` does (seconds, not a file's ~100 s)
loader = RWKV070ModelLoader(f"rwkv7-demo-{a.preset}.pth", device=a.device, dtype=a.dtype,
                            state_dict=demo_state_dict(a.preset, parse_device(a.device)))
if a.grouped:
    type(loader.model).graphed_prefill = property(lambda _: False)
sched = DynamicScheduler(loader, max_batch_size=8, buffer_size=32)
sched.start_daemon()


def mixed(on: bool):
    """(ms until the forced call ended, ms until the free rows ended, their replies)."""
    guide.FF_MIN = FF_MIN if on else 10**9
    guide.FAST_ON_CUDA = on
    t0 = time.perf_counter()
    free = [sched.new_task(loader.encode(f"User: tell a story {i}\n\nAssistant:"),
                           max_tokens=64, temperature=0.0) for i in range(a.free)]
    call = sched.new_task(loader.encode("User: weather?\n\nAssistant: <think>\n</think"),
                          max_tokens=80, temperature=0.0,
                          constraint=Constraint(CALL, loader.tokenizer))
    call.wait()
    t_call = time.perf_counter() - t0
    for t in free:
        t.wait()
    t_free = time.perf_counter() - t0
    return t_call, t_free, tuple(tuple(t.output) for t in free + [call])


if a.free:
    print(f"preset {a.preset}, {a.device}: one forced call beside {a.free} free rows of 64 "
          f"tokens, medians of {a.repeat} rounds")
    print("| fast-forward | forced call ms | free rows ms | same replies |")
    print("|---|---|---|---|")
    for _ in range(2):
        mixed(True), mixed(False)
    got = {True: [], False: []}
    for _ in range(a.repeat):
        for on in (True, False):
            got[on].append(mixed(on))
    same = len({r[2] for r in got[True] + got[False]}) == 1
    for on in (True, False):
        print(f"| {'on' if on else 'off'} | {statistics.median(r[0] for r in got[on]) * 1e3:.1f} |"
              f" {statistics.median(r[1] for r in got[on]) * 1e3:.1f} | {same} |", flush=True)
    sched.shutdown()
    raise SystemExit


def run(rows: int, on: bool):
    guide.FF_MIN = FF_MIN if on else 10**9
    guide.FAST_ON_CUDA = on
    steps0 = sum(p["steps"] for p in sched.pulses)
    tasks = []
    t0 = time.perf_counter()
    for i in range(rows):
        t = sched.new_task(loader.encode(f"User: weather in town {i}?\n\nAssistant: <think>\n"
                                         "</think"), max_tokens=80, temperature=0.0,
                           constraint=Constraint(CALL, loader.tokenizer))  # (queued)
        tasks.append(t)
    for t in tasks:
        t.wait()
    wall = time.perf_counter() - t0
    steps = sum(p["steps"] for p in sched.pulses) - steps0
    return wall, tuple(tuple(t.output) for t in tasks), steps


print(f"preset {a.preset}, {a.device}, FF_MIN {FF_MIN}, one daemon scheduler, medians of "
      f"{a.repeat} rounds, fed runs {'grouped' if a.grouped else 'a pass each where graphed'}")
print("| rows | fast-forward | wall ms | tokens a reply | decode steps | same replies |")
print("|---|---|---|---|---|---|")
for rows in (1, 8):
    for _ in range(2):
        run(rows, True), run(rows, False)  # warm (graphs of each capacity, kernels)
    got = {True: [], False: []}
    for _ in range(a.repeat):
        for on in (True, False):
            got[on].append(run(rows, on))
    same = {r[1] for r in got[True]} == {r[1] for r in got[False]} and \
        len({r[1] for r in got[True]}) == 1
    for on in (True, False):
        wall = statistics.median(r[0] for r in got[on]) * 1e3
        replies = got[on][0][1]
        per = sum(map(len, replies)) / len(replies)
        print(f"| {rows} | {'on' if on else 'off'} | {wall:.1f} | {per:.1f} | "
              f"{statistics.median(r[2] for r in got[on]):.0f} | {same} |", flush=True)
sched.shutdown()
