import httpx, time, json, threading
B = "http://localhost:8791/v1/tasks"
c = httpx.Client(timeout=60)
def p(tag, r): print(tag, r.status_code, r.text[:160].replace("\n", "|"))
t = c.post(B + "/tmp", json={"prompt": "Hi", "max_tokens": 3}).json()["task_id"]; time.sleep(0.5)
p("res", c.get(f"{B}/{t}/get_result"))
for k in ("continue", "as_template", "fork"): p(k, c.post(f"{B}/{t}/{k}", json={} if k != "as_template" else None))
p("export", c.get(f"{B}/{t}/export_state"))
# streamed tmp, creator leaves; another reader follows
with c.stream("POST", B + "/tmp", json={"prompt": "Hi", "max_tokens": 40000, "stream": True}) as r:
    for line in r.iter_lines():
        if line.startswith("data: "): tid = json.loads(line[6:])["task_id"]; break
    other = []
    def follow():
        with httpx.Client(timeout=30) as cc, cc.stream("GET", f"{B}/{tid}/stream") as rr:
            for l in rr.iter_lines():
                if l.startswith("data: "): other.append(l[6:])
    th = threading.Thread(target=follow); th.start(); time.sleep(0.5)
th.join(20); print("other reader ended:", not th.is_alive(), other[-1:] if other else None)
p("status", c.get(f"{B}/{tid}/status"))
