# Session 53 (a review helper's script, kept): a reply fed whole and in random chunks must split alike.
# `python fuzz_split.py SEED` prints "found N" (differences).
import random, sys
from server.api.splitter import OutputSplitter, collect

def run(mode, chunks, reason, **kw):
    s = OutputSplitter(mode, **kw)
    pieces = []
    for c in chunks:
        pieces += s.feed(c)
    pieces += s.finish(reason)
    return pieces, s

ALPH = ["a", "b", " ", "\n", "\n\n", "User:", "<", "</think>", ">", "<tool_call>", "</tool_call>", '{"name": "f", "arguments": {}}', "好", "x", "\"", "U", ":"]
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
found = 0
for it in range(200000):
    mode = rng.choice(["think", "direct", "text"])
    text = "".join(rng.choice(ALPH) for _ in range(rng.randint(1, 8)))
    if mode != "text" and rng.random() < .7: text = ">" + text
    stops = ["".join(rng.choice(["a","b"," ","\n","x",":","U","<",">"]) for _ in range(rng.randint(1,3))) for _ in range(rng.randint(0,2))]
    kw = dict(stop=stops, tools=rng.random() < .5, boundary=rng.random() < .8, inline_think=rng.random()<.2)
    if kw["tools"] and rng.random() < .3: kw["one_call"] = True
    reason = rng.choice(["stop", "length"])
    whole, ws = run(mode, [text], reason, **kw)
    cw = collect(whole)
    # leak check
    if ws.stopped or True:
        for st in stops:
            if st and st in cw["content"] and mode=="text":
                pass
    n = len(text)
    cuts = sorted(rng.sample(range(1, n), rng.randint(0, n-1))) if n > 1 else []
    chunks = [text[a:b] for a, b in zip([0]+cuts, cuts+[n])]
    p, s = run(mode, chunks, reason, **kw)
    if collect(p) != cw or (s.stopped, s.stopped_at) != (ws.stopped, ws.stopped_at):
        found += 1
        if found <= 8:
            print(repr(mode), repr(chunks), kw, reason)
            print("  whole:", cw, ws.stopped, ws.stopped_at)
            print("  chunk:", collect(p), s.stopped, s.stopped_at)
print("found", found)
