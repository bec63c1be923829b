"""Session 54's security review, the stop-string length limit: the splitter's cost when a long
run of output that may still grow into a stop string (spaces, against a stop of spaces) is
broken by another character. Now refused at the request (a stop string has at most
MAX_STOP_CHARS characters); this times the splitter itself with longer stops.
Run from the repository root: PYTHONPATH=. uv run python docs/experiments/session54/review/long_stop.py"""
import time

from server.api.routes.openai_schemas import MAX_STOP_CHARS
from server.api.splitter import OutputSplitter

for run in (MAX_STOP_CHARS, 50_000, 200_000, 400_000):
    stop = " " * (run + 1) + "!"  # (longer than the run: all of it may still be the stop)
    sp = OutputSplitter("text", [stop])
    for _ in range(run // 128):
        sp.feed(" " * 128)  # (a 128-space token a pulse)
    t = time.perf_counter()
    sp.feed("x")
    print(f"stop of {len(stop):,} chars, run of {run // 128 * 128:,} spaces held: the breaking "
          f"chunk took {time.perf_counter() - t:.3f} s")
