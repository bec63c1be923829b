"""Streamed chats with long prompts cut by the client mid-prefill (A: 1 MB cache), interleaved
with the same conversations' complete requests on A and B (cache off): replies compared."""
import random, time, httpx, json, sys
A, B = "http://localhost:8793", "http://localhost:8794"
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
W = "alpha beta gamma delta river stone cloud apple tiger lamp paper seven green quiet".split()
sysp = " ".join(rng.choice(W) for _ in range(200))
c = httpx.Client(timeout=300); diffs = errs = 0
for i in range(12):
    msgs = [{"role": "system", "content": sysp}, {"role": "user", "content": " ".join(rng.choice(W) for _ in range(rng.choice([50, 600, 1500])))}]
    body = dict(model="rwkv-7", messages=msgs, max_tokens=8, temperature=1.0, seed=i, reasoning_effort="none")
    try:
        with c.stream("POST", A + "/v1/chat/completions", json=dict(body, stream=True)) as r:
            t0 = time.time()
            for _ in r.iter_raw():
                if time.time() - t0 > rng.choice([0.01, 0.1, 0.4]): break
    except Exception as e:
        print("stream exc", repr(e))
    ra = c.post(A + "/v1/chat/completions", json=body); rb = c.post(B + "/v1/chat/completions", json=body)
    if ra.status_code != 200 or rb.status_code != 200: errs += 1; print("ERR", ra.status_code, rb.status_code, ra.text[:200]); continue
    a, b = ra.json()["choices"][0]["message"]["content"], rb.json()["choices"][0]["message"]["content"]
    diffs += a != b
    if a != b: print("DIFF", i, repr(a), repr(b))
h = c.get(A + "/health").json(); print("A:", {k: h[k] for k in ("active", "queue", "finishing")}, json.dumps(h["prefix_cache"])[:300])
print("diffs", diffs, "errors", errs)
