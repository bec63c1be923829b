# HEAD on running task streams: returns at once? does it disturb the task or other readers?
import httpx, json, time, threading
B = "http://127.0.0.1:18611"
c = httpx.Client(timeout=60)
res = {}
for kind in ("tmp", "create"):
    r = c.post(f"{B}/v1/tasks/{kind}", json={"prompt": "User: hi\n\nAssistant:", "max_tokens": 200, "temperature": 0, "seed": 1})
    tid = r.json()["task_id"]
    t0 = time.time(); h = c.head(f"{B}/v1/tasks/{tid}/stream"); dt = time.time() - t0
    t1 = time.time(); h2 = c.head(f"{B}/v1/tasks/{tid}/stream?pos=0"); dt2 = time.time() - t1
    st = c.get(f"{B}/v1/tasks/{tid}/status").json()
    while c.get(f"{B}/v1/tasks/{tid}/status").json()["status"] != 3: time.sleep(0.1)
    st2 = c.get(f"{B}/v1/tasks/{tid}/status").json()
    print(kind, "HEAD", h.status_code, dict(h.headers).get("content-type"), len(h.content), round(dt, 3), round(dt2, 3), "status during", st, "final", st2)
# streamed tmp creator + HEAD from another client on its stream
toks = []
def creator():
    with c.stream("POST", f"{B}/v1/tasks/tmp", json={"prompt": "User: hi\n\nAssistant:", "max_tokens": 150, "stream": True, "temperature": 0, "seed": 1}) as r:
        done = False
        for l in r.iter_lines():
            if l.startswith("data: "):
                if l[6:] == "[DONE]": done = True; break
                ev = json.loads(l[6:]); toks.append(ev)
        res["done"] = done
th = threading.Thread(target=creator); th.start()
while not toks: time.sleep(0.01)
tid = toks[0]["task_id"]
c2 = httpx.Client(timeout=60)
for i in range(5):
    t0 = time.time(); h = c2.head(f"{B}/v1/tasks/{tid}/stream"); print("HEAD on streamed tmp", h.status_code, round(time.time() - t0, 3))
th.join()
print("creator done", res, "events", len(toks), "status", c.get(f"{B}/v1/tasks/{tid}/status").status_code, c.get(f"{B}/v1/tasks/{tid}/status").text)
