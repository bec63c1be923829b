import httpx, time
U="http://localhost:8791"
tid=httpx.post(U+"/v1/tasks/create", json={"prompt":"long","max_tokens":2500}).json()["task_id"]
time.sleep(0.5)
t0=time.time(); raw=[]
with httpx.stream("POST", U+"/v1/chat/completions", json={"model":"x","messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":True}, timeout=120) as r:
    for chunk in r.iter_raw():
        raw.append((round(time.time()-t0,1), chunk[:90]))
for x in raw: print(x)
# task api stream subscriber on the long-running queue too
