"""Summarise py-spy's raw (collapsed) samples by thread: samples per thread, the frames with
the most samples on the stack (inclusive) and at its top (self).
    python docs/experiments/session33/collapsed_top.py on.collapsed [N]"""
import re
import sys
from collections import Counter, defaultdict

path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
per_thread, incl, own = Counter(), defaultdict(Counter), defaultdict(Counter)
for line in open(path):
    stack, _, count = line.rstrip("\n").rpartition(" ")
    frames = stack.split(";")
    thread = re.sub(r"^thread \(\d+\): ", "", frames[0])
    thread = re.sub(r"\d+$", "", thread)
    c = int(count)
    per_thread[thread] += c
    for f in set(frames[1:]):
        incl[thread][f] += c
    own[thread][frames[-1]] += c
for thread, total in per_thread.most_common():
    print(f"\n== {thread}: {total} samples")
    print("-- inclusive")
    for f, c in incl[thread].most_common(n):
        print(f"{c:6d} {100 * c / total:5.1f}%  {f}")
    print("-- self")
    for f, c in own[thread].most_common(n // 2):
        print(f"{c:6d} {100 * c / total:5.1f}%  {f}")
