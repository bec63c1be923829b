# A task continued after a restart samples as its copy continued before the restart (state,
# penalties, random stream all persisted)?  Also an imported template and as_template ones.
import httpx, time, subprocess
B = "http://localhost:8791/v1/tasks"
c = httpx.Client(timeout=60)
def wait(t):
    for _ in range(200):
        r = c.get(f"{B}/{t}/get_result").json()
        if r["finished"]: return r
        time.sleep(0.05)
par = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "presence_penalty": 0.5, "repetition_penalty": 0.3, "penalty_decay": 0.9}
t1 = c.post(B + "/create", json={"prompt": "Once upon a time", "max_tokens": 8, "seed": 7, **par}).json()["task_id"]; wait(t1)
f = c.post(f"{B}/{t1}/fork", json={"max_tokens": 8}).json()["task_id"]; a = wait(f)["result"]
tp = c.post(f"{B}/{t1}/as_template?name=det").json()["task_id"]
g = c.post(f"{B}/_det/fork", json={"max_tokens": 8}).json()["task_id"]; b = wait(g)["result"]
data = c.get(f"{B}/{t1}/export_state").content
print(c.post(f"{B}/import_state?name=detimp", content=data).status_code)
time.sleep(1)
subprocess.run(["/tmp/rev_task/review/srv.sh", "stop"]); subprocess.run(["/tmp/rev_task/review/srv.sh", "start"])
c = httpx.Client(timeout=60)
c.post(f"{B}/{t1}/continue", json={"max_tokens": 8}); a2 = wait(t1)["result"]
g2 = c.post(f"{B}/_det/fork", json={"max_tokens": 8}).json()["task_id"]; b2 = wait(g2)["result"]
print("fork before restart == continue after:", a == a2, repr(a), repr(a2))
print("template fork before == after:", b == b2, repr(b), repr(b2))
h = c.post(f"{B}/_detimp/fork", json={"max_tokens": 8, "seed": 7, **par}).json()["task_id"]; h1 = wait(h)["result"]
h = c.post(f"{B}/_det/fork", json={"max_tokens": 8, "seed": 7, **par}).json()["task_id"]; h2 = wait(h)["result"]
print("seeded fork of import == of as_template:", h1 == h2, repr(h1), repr(h2))
