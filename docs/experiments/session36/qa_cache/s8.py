import sys, json, struct, hashlib, random
sys.path.insert(0, "/tmp/qa_cache")
from h import *
def export(port, tid):
    r = C.get(f"http://localhost:{port}/v1/tasks/{tid}/export_state")
    n = struct.unpack("<Q", r.content[:8])[0]
    return hashlib.sha1(r.content[8+n:]).hexdigest()[:10]
port = int(sys.argv[1]); out = {}
for v in range(int(sys.argv[2]), int(sys.argv[3])):
    rng = random.Random(5000 + v)
    L = rng.choice([33, 65, 40, 77])
    P = [rng.randrange(1, 60000) for _ in range(L)]
    samp = {"max_tokens": 50, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "seed": v}
    r1, T1 = task(port, "create", {"prompt": P, **samp})       # control: cold
    r2, T2 = task(port, "create", {"prompt": P, **samp})       # same again (whole-prompt hit)
    r3, T3 = task(port, "create", {"prompt": P[:-1] + [P[-1] ^ 1], **samp})  # differs in last token
    P4 = P + [rng.randrange(1, 60000) for _ in range(rng.choice([1, 2, 31, 32, 33]))]
    r4, T4 = task(port, "create", {"prompt": P4, **samp})
    out[v] = [L, len(P4), export(port, T1), export(port, T2), export(port, T3), export(port, T4), r1, r2, r3, r4]
json.dump(out, open(f"/tmp/qa_cache/s8_{port}.json", "w"), ensure_ascii=False)
