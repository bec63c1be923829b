import sys, json, random
sys.path.insert(0, "/tmp/qa_cache")
from h import *
port = int(sys.argv[1]); out = {}
for v in range(int(sys.argv[2]), int(sys.argv[3])):
    rng = random.Random(9000 + v)
    P = [rng.randrange(1, 60000) for _ in range(rng.choice([33, 65]))]
    z = comp(port, P, max_tokens=0)
    a = comp(port, P, max_tokens=150, temperature=1.0, top_p=1.0, seed=v)
    out[v] = [z, a]
json.dump(out, open(f"/tmp/qa_cache/s9_{port}.json", "w"), ensure_ascii=False)
print(health(port)["hits"])
