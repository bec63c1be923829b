"""Minimal repro: a task that generated with a presence penalty; its seeded fork vs the seeded
fork of its exported-then-imported state (and of its as_template copy).
README: 'the same request samples the same tokens from the same state, whether the state is a
task's, its template's or an imported export of it'. prefix_cache.md: forks/requests from a
template: 'penalties start at zero'."""
import httpx, secrets, sys, time
B = f"http://127.0.0.1:{sys.argv[1] if len(sys.argv) > 1 else 8711}"
c = httpx.Client(base_url=B, timeout=120)
def wait(t):
    while True:
        r = c.get(f"/v1/tasks/{t}/get_result").json()
        if r["finished"]: return r["result"]
        time.sleep(0.1)
def fork(src, body): return wait(c.post(f"/v1/tasks/{src}/fork", params={"tmp": "true"}, json=body).json()["task_id"])
diff = 0
N = int(sys.argv[2]) if len(sys.argv) > 2 else 10
for s in range(N):
    src = {"prompt": "alpha beta gamma", "max_tokens": 20, "temperature": 1.0, "top_p": 0.3, "top_k": 50,
           "presence_penalty": 2.0, "seed": s}
    t = c.post("/v1/tasks/create", json=src).json()["task_id"]; wait(t)
    imp = c.post("/v1/tasks/import_state", params={"name": "qaex" + secrets.token_hex(3)},
                 content=c.get(f"/v1/tasks/{t}/export_state").content).json()["task_id"]
    tpl = c.post(f"/v1/tasks/{t}/as_template").json()["task_id"]
    body = {"prompt": " hello there", "max_tokens": 24, "seed": 7, "temperature": 1.0, "top_p": 0.9, "top_k": 50}
    a, b, d = fork(t, body), fork(imp, body), fork(tpl, body)
    if a != b:
        diff += 1
        k = next(i for i in range(min(len(a), len(b))) if a[i] != b[i]) if a[:min(len(a),len(b))] != b[:min(len(a),len(b))] else min(len(a), len(b))
        print(f"source seed {s}: fork(task) == fork(as_template) {a == d}; fork(task) != fork(imported export) from char {k}:\n  task  : {a!r}\n  import: {b!r}")
    for x in (imp, tpl): c.post(f"/v1/tasks/{x}/delete", params={"force": "true"})
    c.post(f"/v1/tasks/{t}/delete")
print(f"{diff} of {N} source seeds: seeded fork of the task differs from that of its imported export")
