"""Session 53 (a review helper's splitter fuzz, kept): random texts over stops, tags, the turn
boundary, </think> and a multi-byte character, fed in random chunks; counts replies whose
content holds a stop string or the boundary. `python fuzz_leak.py SEED [boundary]`: with
`boundary`, only the boundary (a new turn) is counted; stop strings inside a tool-call block's
text are by design (a stop does not cut a call), so the plain count includes them."""
import random, sys
from server.api.splitter import OutputSplitter, collect
def run(mode, chunks, reason, **kw):
    s = OutputSplitter(mode, **kw)
    pieces = []
    for c in chunks:
        pieces += s.feed(c)
    pieces += s.finish(reason)
    return pieces, s
ALPH = ["a", "b", " ", "\n", "\n\n", "User:", "<", "</think>", ">", "<tool_call>", "</tool_call>", '{"name": "f", "arguments": {}}', "好", "x", "U", ":"]
rng = random.Random(int(sys.argv[1]))
found = 0
for it in range(200000):
    mode = rng.choice(["think", "direct", "text"])
    text = "".join(rng.choice(ALPH) for _ in range(rng.randint(1, 8)))
    if mode != "text" and rng.random() < .7: text = ">" + text
    stops = ["".join(rng.choice(["a","b"," ","\n","x",":","U","<",">"]) for _ in range(rng.randint(1,3))) for _ in range(rng.randint(1,2))]
    kw = dict(stop=stops, tools=rng.random()<.5, boundary=rng.random() < .8)
    reason = rng.choice(["stop", "length"])
    n = len(text)
    cuts = sorted(rng.sample(range(1, n), rng.randint(0, n-1))) if n > 1 else []
    chunks = [text[a:b] for a, b in zip([0]+cuts, cuts+[n])]
    p, s = run(mode, chunks, reason, **kw)
    c = collect(p)["content"]
    bad = ([] if sys.argv[2:] == ["boundary"] else [st for st in stops if st.strip() and st in c]) \
        + (["BOUNDARY"] if kw["boundary"] and "\n\nUser:" in c else [])
    if bad:
        found += 1
        if found <= 8:
            print(mode, repr(chunks), kw, reason, "->", repr(c), bad)
print("found", found)
