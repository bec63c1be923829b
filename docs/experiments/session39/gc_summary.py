"""Summarise gcsite's logs: per server process (run.py) and thread, the collections made while
the chat bench ran (from the first to the last line of the client's log window: the server's
collections after its warm-up), by generation: count, total and largest ms.
    python3 gc_summary.py LOG_DIR START_EPOCH END_EPOCH"""
import glob
import sys
from collections import defaultdict

d, lo, hi = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
for path in sorted(glob.glob(f"{d}/gc-*.tsv")):
    lines = open(path).read().splitlines()
    head = lines[0]
    agg = defaultdict(lambda: [0, 0.0, 0.0])
    for line in lines[1:]:
        t, g, ms, th = line.split("\t")
        if lo <= float(t) <= hi:
            a = agg[(th, int(g))]
            a[0] += 1
            a[1] += float(ms)
            a[2] = max(a[2], float(ms))
    print(head[:120])
    for (th, g), (n, tot, mx) in sorted(agg.items()):
        print(f"  {th:28s} gen {g}: {n:5d} collections, {tot:8.2f} ms total, max {mx:6.2f} ms")
