"""Session 42's review: a chat answer ending at end-of-text gives the same pieces with or
without a stop string that never matches, for any chunking (60,000 random cases).
usage: python fuzz_splitter.py TREE   (a checkout of the commit to test; default: the cwd)"""
import os
import random
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
sys.path.insert(0, root)
from server.api.splitter import OutputSplitter, collect  # noqa: E402


def run(mode, chunks, reason="stop", **kw):
    s = OutputSplitter(mode, **kw)
    pieces = []
    for c in chunks:
        pieces += s.feed(c)
    pieces += s.finish(reason)
    return pieces, s


rng = random.Random(1)
alpha = [" ", "\n", "a", "U", "Q", "\t"]
bad = 0
for it in range(60000):
    mode = rng.choice(["direct", "think"])
    body = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 7)))
    text = ">" + ("r</think>" if mode == "think" and rng.random() < 0.8 else "") + body
    stop = "".join(rng.choice(alpha) for _ in range(rng.randint(1, 4))) + "X"  # never occurs
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 3))))
    chunks = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
    reason = rng.choice(["stop", "length"])
    if collect(run(mode, chunks, reason)[0]) != collect(run(mode, chunks, reason, stop=[stop])[0]):
        bad += 1
print("differences:", bad, "of 60000")
