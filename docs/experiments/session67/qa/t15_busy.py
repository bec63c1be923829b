import httpx, json
c=httpx.Client(base_url="http://localhost:8873", timeout=30)
ids=[]
for i in range(4):
    r=c.post("/v1/tasks/create", json={"prompt":"x","max_tokens":400})
    print("task", i, r.status_code, r.headers.get("retry-after"), r.text[:200])
    if r.status_code==200: ids.append(r.json()["task_id"])
r=c.post("/v1/chat/completions", json={"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":2})
print("chat busy", r.status_code, r.headers.get("retry-after"), r.text[:250])
r=c.post("/v1/chat/completions", json={"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":2,"stream":True})
print("chat stream busy", r.status_code, r.headers.get("retry-after"), r.headers.get("content-type"), r.text[:250])
r=c.post("/v1/tasks/tmp", json={"prompt":"x","max_tokens":2,"stream":True})
print("tmp stream busy", r.status_code, r.headers.get("retry-after"), r.text[:250])
for t in ids: c.post(f"/v1/tasks/{t}/stop", timeout=60)
r=c.post("/v1/chat/completions", json={"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":2,"n":3})
print("n=3 > slots+queue", r.status_code, r.text[:250])
