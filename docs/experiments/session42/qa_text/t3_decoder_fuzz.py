"""IncrementalDecoder (what streams, get_result and the OpenAI routes use) against a whole
decode, for random token sequences rich in byte tokens, fed in random chunks."""
import random, sys
sys.path.insert(0, "/work/main")
from server.model.tokenizer import Tokenizer, IncrementalDecoder
T = Tokenizer()
partial = [i for i in range(1, 65536) if T.token_bytes(i) and not _ok(T.token_bytes(i))] if False else None
def ok(b):
    try: b.decode("utf-8"); return True
    except UnicodeDecodeError: return False
partial = [i for i in range(1, 65536) if T.token_bytes(i) and not ok(T.token_bytes(i))]
ascii_ = [T.encode(c)[0] for c in "aZ .\n"]
whole = [T.encode(c)[0] for c in "é中😀"]
pool = partial + ascii_ * 20 + whole * 10
rng = random.Random(0)
diff = 0
for trial in range(200000):
    toks = [rng.choice(pool) for _ in range(rng.randint(1, 8))]
    ref = T.decode(toks)
    d = IncrementalDecoder(T)
    out, i = "", 0
    while i < len(toks):
        k = rng.randint(1, 3)
        out += d.feed(toks[i:i + k]); i += k
    out += d.flush()
    if out != ref:
        diff += 1
        if diff <= 5:
            print("DIFF", [T.token_bytes(t) for t in toks], repr(ref), repr(out))
print("trials 200000 diffs", diff)
