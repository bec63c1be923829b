import httpx, time
B="http://localhost:8791/v1/tasks"
c=httpx.Client(timeout=60)
# occupy, then queue
a=c.post(B+"/create", json={"prompt":"word "*3000,"max_tokens":50}).json()["task_id"]
b=c.post(B+"/create", json={"prompt":"Hi","max_tokens":5}).json()["task_id"]
seen={a:[],b:[]}
for _ in range(200):
    for t in (a,b):
        s=c.get(f"{B}/{t}/status").json()["status"]
        if not seen[t] or seen[t][-1]!=s: seen[t].append(s)
    if seen[a][-1]==3 and seen[b][-1]==3: break
    time.sleep(0.02)
print(seen)
r=c.get(f"{B}/{a}/get_result").json(); print({k:v for k,v in r.items() if k!="result"})
