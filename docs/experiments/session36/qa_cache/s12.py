import sys, json, random
sys.path.insert(0, "/tmp/qa_cache")
from h import *
port = int(sys.argv[1]); out = {}
for v in range(int(sys.argv[2]), int(sys.argv[3])):
    rng = random.Random(12000 + v)
    X = [rng.randrange(1, 60000) for _ in range(64)]
    R = X + [rng.randrange(1, 60000) for _ in range(10)]
    A = X + [rng.randrange(1, 60000) for _ in range(10)]
    B = X + [rng.randrange(1, 60000)]
    r1 = comp(port, R, max_tokens=5)
    r2 = comp(port, A, max_tokens=5)
    r3 = comp(port, B, max_tokens=150, temperature=1.0, top_p=1.0, seed=v)
    r4 = comp(port, B, max_tokens=60)
    out[v] = [r1, r2, r3, r4]
json.dump(out, open(f"/tmp/qa_cache/s12_{port}.json", "w"), ensure_ascii=False)
