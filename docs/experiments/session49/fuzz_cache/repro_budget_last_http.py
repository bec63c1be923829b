"""HTTP: servers A (RWKV_STATE_CACHE_MB=1) and B (cache off), RWKV_MAX_BATCH_SIZE=1, default
prefill chunk (512 on the CPU). A 33-token max_tokens=0 task stores the state after 32 tokens
on A; then a 545-token prompt sharing those 32 (32 + 512 + 1: after the jump, all but its last
token fill the step's budget exactly) is sent to both, seeded; replies and exported states
compared."""
import sys, random, time, hashlib
import httpx, json, struct
def tensors(b):
    n = struct.unpack('<Q', b[:8])[0]; hdr = json.loads(b[8:8 + n]); hdr.pop('__metadata__', None)
    return hashlib.sha256(b[8 + n:]).hexdigest()[:16]
A, B = "http://localhost:8793", "http://localhost:8794"
c = httpx.Client(timeout=120)
def wait(base, tid):
    for _ in range(1200):
        g = c.get(f"{base}/v1/tasks/{tid}/get_result").json()
        if g.get("finished"): return g
        time.sleep(0.05)
found = 0
LEN = int(sys.argv[2]) if len(sys.argv) > 2 else 545
for seed in range(int(sys.argv[3]) if len(sys.argv) > 3 else 0, int(sys.argv[1]) if len(sys.argv) > 1 else 10):
    rng = random.Random(1000 + seed)
    base = [rng.randrange(300, 20000) for _ in range(33)]
    full = base[:32] + [rng.randrange(300, 20000) for _ in range(LEN - 32)]
    out = {}
    for name, url in (("A", A), ("B", B)):
        t0 = c.post(f"{url}/v1/tasks/tmp", json=dict(prompt=base, max_tokens=0)); assert t0.status_code == 200, t0.text
        r = c.post(f"{url}/v1/tasks/create", json=dict(prompt=full, max_tokens=24, temperature=1.0, top_p=0.9, seed=seed))
        tid = r.json()["task_id"]; g = wait(url, tid)
        st = c.get(f"{url}/v1/tasks/{tid}/export_state")
        out[name] = (g["result"], tensors(st.content), st.status_code)
    same = out["A"][0] == out["B"][0]
    print(f"seed {seed}: same reply={same} same exported state={out['A'][1] == out['B'][1]}")
    if not same:
        print("   A:", repr(out["A"][0])); print("   B:", repr(out["B"][0])); found += 1
h = c.get(A + "/health").json()["prefix_cache"]; print("A cache:", {k: h[k] for k in ("hits", "misses", "tokens_saved", "prefilled_tokens")})
