"""HTTP A/B: the same seeded workload sent to a server with a 1 MB prefix cache (A) and one with
the cache off (B); replies compared; A's /health prefix_cache polled (bytes <= max_bytes)."""
import sys, random, json, threading, time
import httpx

A, B = sys.argv[1], sys.argv[2]
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 0
N = int(sys.argv[4]) if len(sys.argv) > 4 else 60
rng = random.Random(SEED)
WORDS = "alpha beta gamma delta river stone cloud apple tiger lamp paper seven green quiet run jump".split()
def text(n): return " ".join(rng.choice(WORDS) for _ in range(n))
systems = [text(rng.choice([10, 40, 120, 300])) for _ in range(3)]
bad, viol, errors = [], [], []
stop_poll = False
def poll():
    c = httpx.Client(timeout=30)
    while not stop_poll:
        try:
            h = c.get(A + "/health").json()["prefix_cache"]
            if h["bytes"] > h["max_bytes"] or h["device_bytes"] > h["max_bytes"]:
                viol.append(h)
        except Exception as e:
            errors.append(("poll", repr(e)))
        time.sleep(0.05)
th = threading.Thread(target=poll, daemon=True); th.start()
ca, cb = httpx.Client(timeout=300), httpx.Client(timeout=300)

def both(method, path, body):
    ra = ca.request(method, A + path, json=body); rb = cb.request(method, B + path, json=body)
    for r in (ra, rb):
        if r.status_code >= 500: errors.append((path, r.status_code, r.text[:200]))
    return ra, rb

def chat(messages, **kw):
    body = dict(model="rwkv-7", messages=messages, max_tokens=kw.pop("max_tokens", rng.choice([1, 4, 8, 16])), **kw)
    ra, rb = both("POST", "/v1/chat/completions", body)
    if ra.status_code != 200 or rb.status_code != 200:
        errors.append(("chat", ra.status_code, rb.status_code, ra.text[:200], rb.text[:200])); return None
    ja, jb = ra.json(), rb.json()
    ca_ = [c["message"]["content"] for c in ja["choices"]]; cb_ = [c["message"]["content"] for c in jb["choices"]]
    if ca_ != cb_: bad.append(("chat", messages, body, ca_, cb_))
    return ca_[0]

def samp():
    return dict(temperature=0) if rng.random() < 0.5 else dict(temperature=1.0, top_p=0.9, seed=rng.randrange(10**6))

convs = []
for i in range(N):
    r = rng.random()
    try:
        if r < 0.25 or not convs:
            m = [{"role": "system", "content": rng.choice(systems)}, {"role": "user", "content": text(rng.randrange(3, 40))}]
            rep = chat(m, reasoning_effort="none", **samp())
            if rep is not None: convs.append(m + [{"role": "assistant", "content": rep}])
        elif r < 0.45:  # next turn
            c = rng.choice(convs); m = c + [{"role": "user", "content": text(rng.randrange(3, 60))}]
            rep = chat(m, reasoning_effort="none", **samp())
            if rep is not None: convs.append(m + [{"role": "assistant", "content": rep}])
        elif r < 0.55:  # resend a turn / branch
            c = rng.choice(convs); m = c[:-1] if rng.random() < 0.5 else c[:-2] + [{"role": "user", "content": text(5)}]
            chat(m, reasoning_effort="none", **samp())
        elif r < 0.62:  # n > 1
            c = rng.choice(convs); chat(c + [{"role": "user", "content": text(8)}], n=rng.choice([2, 3]), temperature=1.0, seed=rng.randrange(10**6), reasoning_effort="none")
        elif r < 0.72:  # template + forks (Task API)
            p = rng.choice(systems) + "\n\nUser: " + text(rng.randrange(3, 30)) + "\n\nAssistant:"
            ra, rb = both("POST", "/v1/tasks/create", dict(prompt=p, max_tokens=0))
            if ra.status_code != 200 or rb.status_code != 200:
                errors.append(("create", ra.status_code, rb.status_code, ra.text[:200])); continue
            name = f"t{SEED}_{i}"
            ids = []
            for r_, cl, base in ((ra, ca, A), (rb, cb, B)):
                tid = r_.json()["task_id"]
                t = cl.post(base + f"/v1/tasks/{tid}/as_template?name={name}")
                if t.status_code != 200: errors.append(("as_template", t.status_code, t.text[:200]))
            for k in range(rng.choice([1, 2, 3])):
                body = dict(prompt=" " + text(rng.randrange(1, 30)) + "\n\nUser: ok\n\nAssistant:", max_tokens=rng.choice([1, 6]), **samp())
                outs = []
                for cl, base in ((ca, A), (cb, B)):
                    f = cl.post(base + f"/v1/tasks/_{name}/fork?tmp=true", json=body)
                    if f.status_code != 200: errors.append(("fork", f.status_code, f.text[:200])); outs.append(None); continue
                    fid = f.json()["task_id"]
                    for _ in range(600):
                        g = cl.get(base + f"/v1/tasks/{fid}/get_result").json()
                        if g.get("finished"): break
                        time.sleep(0.05)
                    outs.append(g.get("result"))
                if outs[0] != outs[1]: bad.append(("fork", name, body, outs))
            # a chat from the template too
            c = [{"role": "user", "content": text(6)}]
            chat(c, model=f"rwkv-7:_{name}", reasoning_effort="none", **samp()) if False else None
            body = dict(model=f"rwkv-7:_{name}", messages=c, max_tokens=6, reasoning_effort="none", temperature=0)
            ra, rb = both("POST", "/v1/chat/completions", body)
            if ra.status_code == 200 and rb.status_code == 200:
                if ra.json()["choices"][0]["message"]["content"] != rb.json()["choices"][0]["message"]["content"]:
                    bad.append(("tplchat", name, ra.json()["choices"], rb.json()["choices"]))
            else: errors.append(("tplchat", ra.status_code, rb.status_code, ra.text[:200]))
        elif r < 0.8:  # persistent create + continue
            p = rng.choice(systems) + "\n\nUser: " + text(rng.randrange(3, 30)) + "\n\nAssistant:"
            s = samp(); outs = []; cp = "\n\nUser: " + text(12) + "\n\nAssistant:"
            for cl, base in ((ca, A), (cb, B)):
                t = cl.post(base + "/v1/tasks/create", json=dict(prompt=p, max_tokens=4, **s)).json()["task_id"]
                res = []
                for rnd in range(2):
                    for _ in range(600):
                        g = cl.get(base + f"/v1/tasks/{t}/get_result").json()
                        if g.get("finished"): break
                        time.sleep(0.05)
                    res.append(g.get("result"))
                    if rnd == 0:
                        x = cl.post(base + f"/v1/tasks/{t}/continue", json=dict(prompt=cp, max_tokens=4))
                        if x.status_code != 200: errors.append(("continue", x.status_code, x.text[:200]))
                outs.append(res)
            if outs[0] != outs[1]: bad.append(("continue", p, outs))
        elif r < 0.88:  # long prompt stopped mid-prefill (A only), then a reply that shares it
            p = rng.choice(systems) + "\n\nUser: " + text(1500) + "\n\nAssistant:"
            t = ca.post(A + "/v1/tasks/tmp", json=dict(prompt=p, max_tokens=5)).json()["task_id"]
            time.sleep(rng.choice([0.0, 0.05, 0.3]))
            s = ca.post(A + f"/v1/tasks/{t}/stop")
            if s.status_code >= 500: errors.append(("stop", s.status_code, s.text[:200]))
            body = dict(model="rwkv-7", prompt=p, max_tokens=4, temperature=0)
            ra, rb = both("POST", "/v1/completions", body)
            if ra.json()["choices"][0]["text"] != rb.json()["choices"][0]["text"]: bad.append(("after_stop", ra.json(), rb.json()))
        else:  # long completion (> prefill chunk)
            p = rng.choice(systems) + " " + text(rng.choice([200, 700, 1200]))
            body = dict(model="rwkv-7", prompt=p, max_tokens=4, **samp())
            ra, rb = both("POST", "/v1/completions", body)
            if ra.json()["choices"][0]["text"] != rb.json()["choices"][0]["text"]: bad.append(("long", body, ra.json()["choices"], rb.json()["choices"]))
    except Exception as e:
        errors.append(("exc", i, repr(e)))
stop_poll = True; th.join()
time.sleep(1)
h = ca.get(A + "/health").json()
print("health A prefix_cache:", json.dumps(h["prefix_cache"]))
print("health A:", {k: h[k] for k in h if k in ("active", "queue", "capacity", "status")})
print(f"seed {SEED}: diffs={len(bad)} bytes_violations={len(viol)} errors={len(errors)}")
for b in bad[:6]: print("DIFF", str(b)[:1500])
for e in errors[:6]: print("ERR", str(e)[:400])
for v in viol[:3]: print("VIOL", v)
