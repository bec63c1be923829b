import sys, json, struct, hashlib, random
sys.path.insert(0, "/tmp/qa_cache")
from h import *
def export(port, tid):
    r = C.get(f"http://localhost:{port}/v1/tasks/{tid}/export_state")
    n = struct.unpack("<Q", r.content[:8])[0]; hdr = json.loads(r.content[8:8+n])
    m = hdr["__metadata__"]
    return json.loads(m["history"]), json.loads(m["current_token"]), hashlib.sha1(r.content[8+n:]).hexdigest()[:10]
port = int(sys.argv[1]); lo, hi = int(sys.argv[2]), int(sys.argv[3])
out = {}
for v in range(lo, hi):
    rng = random.Random(v)
    P = [rng.randrange(1, 60000) for _ in range(64)]   # aligned prompt
    r, T = task(port, "create", {"prompt": P, "max_tokens": 40, "temperature": 0})
    hist, cur, _ = export(port, T)
    Y = [rng.randrange(1, 60000) for _ in range(20)]
    samp = {"max_tokens": 200, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "seed": v}
    rf, F = task(port, "create", {"prompt": hist + [cur] + Y, **samp})
    rc, _ = task(port, f"{T}/continue", {"prompt": Y, **samp})
    h2, c2, sh = export(port, T); h3, c3, sh3 = export(port, F)
    out[v] = (rf, rc, sh, sh3)
    print(v, "fresh==cont text", rf == rc, "state cont", sh, "state fresh", sh3, "hist equal", h2 == h3, flush=True)
json.dump(out, open(f"/tmp/qa_cache/s6_{port}.json", "w"), ensure_ascii=False)
