import random, time
from server.model.tokenizer import Tokenizer, ReusingEncoder, common_prefix_length
tok = Tokenizer()
rng = random.Random(7)
vs = []
for t in range(1, 65536):
    b = tok.token_bytes(t)
    try: vs.append(b.decode("utf-8"))
    except UnicodeDecodeError: pass
L = tok.max_len
bad = 0; N = 0; t0=time.time()
# 1) long texts from vocab tokens, cut near boundaries, both longer & shorter
for trial in range(150):
    enc = ReusingEncoder(tok)
    base = "".join(rng.choice(vs) for _ in range(rng.randrange(200, 6000)))
    enc.encode(base)
    for k in range(20):
        cut = rng.randrange(0, len(base))
        r = rng.random()
        if r < 0.3: t = base[:cut]
        elif r < 0.6: t = base[:cut] + rng.choice(vs) + base[cut:]
        elif r < 0.8: t = base[:cut] + "".join(rng.choice(vs) for _ in range(5))
        else:
            t = base[:cut] + base[cut+1:]
        a = enc.encode(t); b = tok.encode(t); N += 1
        if a != b:
            bad += 1; print("MISMATCH1", trial, cut)
# 2) runs of repeated chars, shared prefix ending at every offset around L
for ch in [" ", "=", "-", "\n", "0", "你", "😀", "ab", "\t", "*", "#", ".", "_"]:
    for n in list(range(L-5, L+140)) + [500, 1000, 2335, 2336, 2337, 5000]:
        enc = ReusingEncoder(tok)
        base = "X" + ch * n + "Y"
        enc.encode(base)
        for t in [ch*n, "X"+ch*(n+1), "X"+ch*(n-1)+"Z", "X"+ch*n+ch, "X"+ch*n, "X"+ch*(n//2)]:
            a = enc.encode(t); b = tok.encode(t); N += 1
            if a != b: bad += 1; print("MISMATCH2", repr(ch), n, repr(t[:20]))
# 3) interleaved many chats so window rotates
enc = ReusingEncoder(tok)
chats = [["System: " + "".join(rng.choice(vs) for _ in range(rng.randrange(50,300)))] for _ in range(20)]
for step in range(3000):
    c = rng.choice(chats)
    c.append("User: " + "".join(rng.choice(vs) for _ in range(rng.randrange(1,40))) + rng.choice(["", "\n", " ", "你", "\u0301"]))
    if rng.random()<0.2 and len(c)>2: c.pop()
    t = "\n\n".join(c) + rng.choice(["\n\nAssistant:", "\n\nAssistant: <think", "", "\n\n"])
    a = enc.encode(t); b = tok.encode(t); N += 1
    if a != b: bad += 1; print("MISMATCH3", step)
# 4) byte-level: strings differing in the last byte of multibyte char
cj = [chr(c) for c in range(0x4E00, 0x4E00+2000)] + [chr(c) for c in range(0x1F600, 0x1F650)]
enc = ReusingEncoder(tok)
for i in range(3000):
    p = "".join(rng.choice(vs) for _ in range(rng.randrange(10, 200)))
    t1 = p + rng.choice(cj) + "".join(rng.choice(vs) for _ in range(3))
    t2 = p + rng.choice(cj) + "".join(rng.choice(vs) for _ in range(3))
    for t in (t1, t2):
        a = enc.encode(t); b = tok.encode(t); N += 1
        if a != b: bad += 1; print("MISMATCH4", i)
print("cases", N, "bad", bad, time.time()-t0)
# common_prefix_length vs naive
import numpy as np
from array import array
for i in range(3000):
    n = rng.choice([0,1,31,32,33,287,288,289,2335,2336,2337,18719,18720,18721, rng.randrange(0,40000)])
    a = bytes(rng.randrange(256) for _ in range(n)) if n < 3000 else rng.randbytes(n)
    m = rng.randrange(0, n+1)
    b = a[:m] + (bytes([(a[m]+1)%256]) if m < n else b"") + a[m+1:] if rng.random()<0.7 else a[:m]
    if rng.random()<0.5: b = b + rng.randbytes(rng.randrange(0,100))
    exp = next((k for k in range(min(len(a),len(b))) if a[k]!=b[k]), min(len(a),len(b)))
    got = common_prefix_length(a, b)
    if got != exp: print("CPL mismatch", n, m, exp, got); bad+=1
    aa = array("I", list(a[:2000])); bb = array("I", list(b[:2000]))
    exp2 = next((k for k in range(min(len(aa),len(bb))) if aa[k]!=bb[k]), min(len(aa),len(bb)))
    if common_prefix_length(aa,bb)!=exp2: print("CPL arr mismatch"); bad+=1
print("final bad", bad)
