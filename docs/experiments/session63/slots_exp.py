"""Session 63: how often a batched prefill pass's slots are a consecutive range (fed in place
through views, ``State.rows``) or not (gathered and put back: ``State.select`` / ``assign``,
the 629 MiB at the peak of session 63's call 3). Serves ``server.bench memory``'s load (the
stress bench's prompts) through the real scheduler on the random tiny model, on this machine.

    uv run python docs/experiments/session63/slots_exp.py MAX_BATCH REQUESTS   # e.g. 256 256
"""
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from server.config import Settings
from server.api.lifecycle import build_runtime, close_runtime
from server.scheduler.engine import BatchEngine
from server.bench.memory import run_load

stats = collections.Counter()
inner = BatchEngine.prefill
def prefill(self, slots, token_lists, first=(), mid=()):
    asc = list(slots) == list(range(min(slots), min(slots) + len(slots)))
    as_set = sorted(slots) == list(range(min(slots), min(slots) + len(slots)))
    kind = "one" if len(slots) == 1 else "ascending" if asc else "set" if as_set else "neither"
    stats[kind] += 1
    stats[kind + "_rows"] += len(slots)
    if kind in ("set", "neither") and stats[kind] <= 3:
        print(kind, list(slots)[:20], file=sys.stderr)
    return inner(self, slots, token_lists, first, mid)
BatchEngine.prefill = prefill
import tempfile
with tempfile.TemporaryDirectory() as tmp:
    rt = build_runtime(Settings(demo="tiny", max_batch_size=int(sys.argv[1]), task_db_path=tmp + "/t.db"))
    try:
        run_load(rt.scheduler, int(sys.argv[2]), 8)
    finally:
        close_runtime(rt)
print(dict(stats))
