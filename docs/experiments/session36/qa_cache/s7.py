import sys, json, struct, hashlib, random
sys.path.insert(0, "/tmp/qa_cache")
from h import *
def export(port, tid):
    r = C.get(f"http://localhost:{port}/v1/tasks/{tid}/export_state")
    n = struct.unpack("<Q", r.content[:8])[0]
    return hashlib.sha1(r.content[8+n:]).hexdigest()[:10]
port = int(sys.argv[1]); out = {}
for v in range(int(sys.argv[2]), int(sys.argv[3])):
    rng = random.Random(1000 + v)
    L = rng.choice([33, 65, 97, 129])
    P = [rng.randrange(1, 60000) for _ in range(L)]
    r0, T0 = task(port, "create", {"prompt": P, "max_tokens": 0})
    samp = {"max_tokens": 150, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "seed": v}
    r1, T1 = task(port, "create", {"prompt": P, **samp})
    rg, T2 = task(port, "create", {"prompt": P, "max_tokens": 60, "temperature": 0})
    # also OpenAI completion with same ids
    c = comp(port, P, max_tokens=60)
    out[v] = [r1, rg, c, export(port, T0), export(port, T1), export(port, T2)]
    print(v, L, out[v][3:], flush=True)
json.dump(out, open(f"/tmp/qa_cache/s7_{port}.json", "w"), ensure_ascii=False)
