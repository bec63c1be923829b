import random, sys, time
from server.model.tokenizer import Tokenizer, ReusingEncoder, common_prefix_length
tok = Tokenizer()
print("max_len", tok.max_len)
rng = random.Random(12345)
vocab_strs = []
for t in range(1, 65536):
    b = tok.token_bytes(t)
    if not b: continue
    try: vocab_strs.append(b.decode("utf-8"))
    except UnicodeDecodeError: pass
long_toks = [s for s in vocab_strs if len(s.encode()) >= 8]
print(len(vocab_strs), len(long_toks))
ATOMS = ["a","b"," ","  ","\n","\n\n","\t","你","好","世界","😀","👨‍👩‍👧","e\u0301","\u0301","é","ñ","Ω","\u200d","\ufe0f","🇯🇵","ك","ा","x"*3,"User:","Assistant:"," <think","</think>","```","    ","\r\n","\ud800"]
def rtext(n):
    parts=[]
    for _ in range(n):
        r = rng.random()
        if r < 0.5: parts.append(rng.choice(vocab_strs))
        elif r < 0.7: parts.append(rng.choice(long_toks))
        elif r < 0.95: parts.append(rng.choice(ATOMS))
        else: parts.append(chr(rng.randrange(0x20, 0x2FFFF)) if rng.random()<0.9 else chr(rng.randrange(0xD800,0xE000)))
    return "".join(parts)
def mutate(base):
    k = rng.random()
    # cut at arbitrary char index
    cut = rng.randrange(0, len(base)+1)
    if k < 0.25: return base[:cut] + rtext(rng.randrange(0, 30))
    if k < 0.4: return base[:cut]
    if k < 0.55: return base[:-1] + rng.choice(ATOMS+vocab_strs[:2000]) if base else rtext(5)
    if k < 0.7: return base + rtext(rng.randrange(1, 40))
    if k < 0.8:  # cut in middle of utf8 byte sequence -> via bytes? can't as str; use surrogate/combining
        return base[:cut] + rng.choice(["\u0301","\u200d","\ufe0f","\u0308"]) + base[cut:]
    if k < 0.9: return base[:cut] + " "*rng.randrange(1,40) + base[cut:]
    return base[:cut] + "\n\n" + rtext(10)
bad = 0; N=0
t0=time.time()
for trial in range(int(sys.argv[1]) if len(sys.argv)>1 else 200):
    enc = ReusingEncoder(tok, entries=rng.choice([1,2,8,8,8]))
    pool = [rtext(rng.randrange(1, 400)) for _ in range(rng.randrange(1, 12))]
    for step in range(rng.randrange(5, 60)):
        if rng.random() < 0.8 and pool:
            t = mutate(rng.choice(pool))
        else:
            t = rtext(rng.randrange(0, 600))
        pool.append(t)
        if len(pool) > 20: pool.pop(rng.randrange(len(pool)))
        a = enc.encode(t); b = tok.encode(t); N+=1
        if a != b:
            bad += 1
            if bad <= 5: print("MISMATCH", repr(t)[:200])
print("cases", N, "bad", bad, "secs", time.time()-t0)
